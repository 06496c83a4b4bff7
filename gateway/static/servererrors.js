// Error frames from the server: what each means to the page and what it does
// (reload a history with a gap, resend what is pending after a pause, drop
// what cannot pass, leave on an expired session, or mark one message failed).

/**
 * Handle one `error` frame. `app` gives the page's state and views and
 * `connection()` (the current connection), `selectGroup`, `leaveApp` and
 * `refreshGroups`.
 */
export function handleServerError(frame, app) {
  const { state, ops, timeline, toast } = app;
  const connection = app.connection();
  const groupId = frame.detail?.groupId || frame.groupId || state.groupId;
  if (frame.code === 'gap') {
    // What was missed is older than the log keeps: re-read the stored history.
    if (groupId === state.groupId) {
      toast('Some live updates were too old to replay; reloaded the history.', 'info');
      app.selectGroup(state.groupId);
    }
    return;
  }
  if (frame.code === 'rate_limited') {
    // The dropped frame is not named; resending what is unacknowledged is
    // harmless because the server ignores a clientMessageId it has stored.
    const wait = Number(frame.detail?.retryAfterMs) || 1000;
    setTimeout(() => state.groupId && app.connection()?.resendPending(state.groupId), wait);
    toast('Sending too fast: retrying in a moment.', 'info');
    return;
  }
  if (frame.code === 'busy' && frame.requestId) {
    // Too much is waiting (in the group, on a VP or on this connection): the
    // message was not stored. It stays pending and goes again, alone, after
    // the server's estimate; other pending messages are not resent with it.
    const cmid = frame.requestId;
    const wait = Math.max(1, Number(frame.retryAfter) || 1) * 1000;
    setTimeout(() => {
      const now = app.connection();
      const again = now?.outbox.get(cmid);
      if (again) now.send(again);
    }, wait);
    toast(`The group is busy: sending again in ${Math.ceil(wait / 1000)} s.`, 'info');
    return;
  }
  if (frame.code === 'frame_too_large') {
    // The server names no message: drop every pending one too large to pass,
    // so none is left "sending…" and resent on each reconnect or reload.
    ops.dropRefused(connection, state.groupId, Number(frame.detail?.limit) || 0);
    toast(`${frame.message}: the message was not sent.`);
    return;
  }
  if (frame.code === 'unauthorized') {
    app.leaveApp('Your session has expired: log in again.');
    return;
  }
  if (frame.code === 'not_found' && frame.detail?.groupId && !frame.requestId) {
    // The group is gone, or the user is no longer one of its members.
    toast(frame.message);
    app.refreshGroups().then(() => {
      if (!state.groups.some((g) => g.id === state.groupId)) app.selectGroup(state.groups[0]?.id || null);
    });
    return;
  }
  const cmid = frame.requestId;
  if (cmid && connection.pending(state.groupId).some((f) => f.clientMessageId === cmid)) {
    timeline.fail(cmid, frame.message);
    connection.drop(cmid);
  }
  toast(frame.message || `error: ${frame.code}`);
}
