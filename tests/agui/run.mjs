// Runs one AG-UI run against the gateway with the official client
// (@ag-ui/client's HttpAgent), which parses the SSE stream and verifies the
// order of its events (verifyEvents). Prints one JSON line per event, then a
// line {"done": ...} with the run's result and the messages the client
// built from the events; on any error, {"error": ...} and exit code 1.
//
//   node run.mjs --url=http://127.0.0.1:8000/api/groups/GID/agui --token=T --text="@linus hi"
import { HttpAgent } from "@ag-ui/client";

const args = Object.fromEntries(
  process.argv.slice(2).map((a) => {
    const i = a.indexOf("=");
    return [a.slice(2, i), a.slice(i + 1)];
  }),
);
const out = (line) => process.stdout.write(JSON.stringify(line) + "\n");

const agent = new HttpAgent({
  url: args.url,
  headers: { Authorization: `Bearer ${args.token}` },
  threadId: args.thread ?? "thread-1",
  initialMessages: [{ id: "user-1", role: "user", content: args.text }],
});

try {
  const { result, newMessages } = await agent.runAgent(
    { runId: args.run ?? undefined, forwardedProps: {} },
    { onEvent: ({ event }) => out(event) },
  );
  out({ done: true, result, newMessages });
} catch (err) {
  out({ error: String(err?.message ?? err) });
  process.exit(1);
}
