// Runs one AG-UI run against the gateway with the official client
// (@ag-ui/client's HttpAgent), which parses the SSE stream and verifies the
// order of its events (verifyEvents). Prints one JSON line per event, then a
// line {"done": ...} with the run's result and the messages the client
// built from the events; on any error, {"error": ...} and exit code 1. With
// --answer, a run that ends in interrupts (a VP's question) is resumed with
// that answer to each of them, as many times as it takes.
//
//   node run.mjs --url=http://127.0.0.1:8765/api/groups/GID/agui --token=T --text="@linus hi"
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

const subscriber = { onEvent: ({ event }) => out(event) };
try {
  let { result, newMessages } = await agent.runAgent(
    { runId: args.run ?? undefined, forwardedProps: {} },
    subscriber,
  );
  let rounds = 0;
  while (args.answer !== undefined && agent.pendingInterrupts.length > 0 && rounds++ < 5) {
    out({ interrupts: agent.pendingInterrupts });
    const resume = agent.pendingInterrupts.map((i) => ({
      interruptId: i.id,
      status: "resolved",
      payload: { answer: args.answer },
    }));
    const next = await agent.runAgent({ resume }, subscriber);
    result = next.result;
    newMessages = [...newMessages, ...next.newMessages];
  }
  out({ done: true, result, newMessages, pending: agent.pendingInterrupts });
} catch (err) {
  out({ error: String(err?.message ?? err) });
  process.exit(1);
}
