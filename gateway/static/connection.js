// The WebSocket to the gateway: reconnect with backoff, lossless replay,
// and an outbox of chat messages that are resent until acknowledged.
//
// Every envelope from a group's event log carries a per-group `seq`. The
// connection keeps the highest seq seen per group and drops anything at or
// below it, so a replay that overlaps what was already shown is harmless.
// After a reconnect it subscribes again with that `lastSeq` and the server
// replays exactly what was missed.
//
// The connection is an explicit state machine; `transition` refuses a move
// that is not in the table, so a bug shows up as an error in the console
// instead of an indicator that lies.

const TRANSITIONS = {
  idle: ['connecting', 'closed'],
  connecting: ['replaying', 'live', 'reconnecting', 'closed'],
  replaying: ['live', 'reconnecting', 'closed'],
  live: ['replaying', 'reconnecting', 'closed'],
  reconnecting: ['connecting', 'closed'],
  closed: [],
};

const BACKOFF_START_MS = 500;
const BACKOFF_MAX_MS = 10_000;
const CLIENT_PING_MS = 20_000;
const AUTH_EXPIRED = 4401;
const OUTBOX_KEY = 'yeaft.outbox';

/** The words for a connection state (`info.delayMs`: the wait before the next try). */
export function connectionLabel(connState, info = {}, hadDisconnect = false) {
  const labels = {
    connecting: hadDisconnect ? 'reconnecting…' : 'connecting…',
    reconnecting: `reconnecting… (retry in ${Math.ceil((info.delayMs || 0) / 1000)} s)`,
    replaying: hadDisconnect ? 'replaying missed messages…' : 'syncing…',
    live: 'live',
    closed: 'offline',
  };
  return labels[connState] || connState;
}

// Listeners of every frame, beside the page's own `onFrame` (reactions.js).
const frameListeners = new Set();

/** Call `listener(frame)` for every frame any connection hands on. */
export function onEveryFrame(listener) {
  frameListeners.add(listener);
}

export class Connection {
  /**
   * Callbacks: onFrame(frame) for every frame that is not a duplicate,
   * onState(state, info) when the indicator should change, onAuthExpired()
   * when the server closed with 4401.
   */
  constructor({ url, onFrame, onState, onAuthExpired }) {
    this.url = url;
    this.onFrame = onFrame;
    this.onState = onState;
    this.onAuthExpired = onAuthExpired;
    this.state = 'idle';
    this.ws = null;
    this.attempt = 0;
    this.retryTimer = null;
    this.pingTimer = null;
    this.awaitingPong = false;
    this.lastSeq = new Map();
    this.subscriptions = new Set();
    this.control = [];
    this.outbox = loadOutbox();
  }

  transition(next, info = {}) {
    if (next === this.state) {
      this.onState(next, info);
      return;
    }
    if (!TRANSITIONS[this.state].includes(next)) {
      throw new Error(`connection: illegal transition ${this.state} -> ${next}`);
    }
    this.state = next;
    this.onState(next, info);
  }

  start() {
    if (this.state !== 'idle') return;
    this.open();
    window.addEventListener('online', this.retryNow);
    document.addEventListener('visibilitychange', this.retryNow);
  }

  /** Close for good (logout or an expired session). */
  stop() {
    if (this.state === 'closed') return;
    window.removeEventListener('online', this.retryNow);
    document.removeEventListener('visibilitychange', this.retryNow);
    clearTimeout(this.retryTimer);
    clearInterval(this.pingTimer);
    this.transition('closed');
    if (this.ws) this.ws.close(1000, 'bye');
    this.ws = null;
  }

  /** Reconnect at once when the browser comes back online or to the front. */
  retryNow = () => {
    if (this.state !== 'reconnecting' || document.visibilityState === 'hidden') return;
    clearTimeout(this.retryTimer);
    this.open();
  };

  open() {
    this.transition('connecting');
    const ws = new WebSocket(this.url);
    this.ws = ws;
    ws.onopen = () => this.opened(ws);
    ws.onmessage = (event) => this.received(ws, event);
    ws.onclose = (event) => this.closed(ws, event);
  }

  opened(ws) {
    if (ws !== this.ws) return;
    this.attempt = 0;
    this.pingTimer = setInterval(() => this.send({ type: 'ping' }), CLIENT_PING_MS);
    for (const groupId of this.subscriptions) this.sendSubscribe(groupId);
    if (this.subscriptions.size) this.startReplay();
    else this.transition('live');
    for (const frame of this.control.splice(0)) this.send(frame);
  }

  closed(ws, event) {
    if (ws !== this.ws) return;
    this.ws = null;
    clearInterval(this.pingTimer);
    this.awaitingPong = false;
    if (this.state === 'closed') return;
    if (event.code === AUTH_EXPIRED) {
      this.stop();
      this.onAuthExpired();
      return;
    }
    const delay = Math.min(BACKOFF_MAX_MS, BACKOFF_START_MS * 2 ** this.attempt);
    this.attempt += 1;
    this.transition('reconnecting', { delayMs: delay, code: event.code, reason: event.reason });
    this.retryTimer = setTimeout(() => this.open(), delay);
  }

  received(ws, event) {
    if (ws !== this.ws) return;
    let frame;
    try {
      frame = JSON.parse(event.data);
    } catch {
      console.warn('connection: a frame that is not JSON was ignored');
      return;
    }
    if (!frame || typeof frame !== 'object') return;
    if (typeof frame.seq === 'number' && frame.groupId) {
      const seen = this.lastSeq.get(frame.groupId) ?? -1;
      if (frame.seq <= seen) return;
      this.lastSeq.set(frame.groupId, frame.seq);
    }
    if (frame.type === 'pong' && this.awaitingPong) {
      this.awaitingPong = false;
      if (this.state === 'replaying') this.transition('live');
    }
    if (frame.type === 'ping') this.send({ type: 'ping' });
    if (frame.type === 'ack') this.acked(frame.clientMessageId);
    this.onFrame(frame);
    for (const listener of frameListeners) listener(frame);
  }

  /**
   * The gateway handles a connection's frames one at a time and replays a
   * subscription before it reads the next frame, so the pong answering a
   * ping sent right after the subscribes arrives after everything replayed:
   * it marks the moment the client has caught up.
   */
  startReplay() {
    this.transition('replaying');
    this.awaitingPong = true;
    this.send({ type: 'ping' });
  }

  get isOpen() {
    return this.ws !== null && this.ws.readyState === WebSocket.OPEN;
  }

  send(frame) {
    if (!this.isOpen) return false;
    this.ws.send(JSON.stringify(frame));
    return true;
  }

  /** Send now, or as soon as the socket is open again. */
  sendControl(frame) {
    if (!this.send(frame)) this.control.push(frame);
  }

  /** Watch a group from just after `lastSeq` (what the history already shows). */
  subscribe(groupId, lastSeq) {
    this.subscriptions.add(groupId);
    if (typeof lastSeq === 'number') this.lastSeq.set(groupId, lastSeq);
    if (this.isOpen) {
      this.sendSubscribe(groupId);
      this.startReplay();
    }
  }

  /**
   * Subscribe, then resend the group's unacknowledged messages. They go
   * only to a watched group, after the view has drawn them as pending, so
   * their acks always find them on screen.
   */
  sendSubscribe(groupId) {
    const frame = { type: 'subscribe', groupId };
    const seq = this.lastSeq.get(groupId);
    if (typeof seq === 'number' && seq >= 0) frame.lastSeq = seq;
    this.send(frame);
    this.resendPending(groupId);
  }

  resendPending(groupId) {
    for (const frame of this.pending(groupId)) this.send(frame);
  }

  unsubscribe(groupId) {
    if (!this.subscriptions.delete(groupId)) return;
    this.lastSeq.delete(groupId);
    this.send({ type: 'unsubscribe', groupId });
  }

  /** Queue a chat message; it is resent on every reconnect until acked. */
  sendChat(groupId, text, mentions, clientMessageId, files, threadId) {
    const frame = { type: 'yeaft_session_chat', groupId, text, clientMessageId };
    if (threadId) frame.threadId = threadId; // a reply in a thread (threadpanel.js)
    if (mentions && mentions.length) frame.mentions = mentions;
    if (files && files.length) frame.attachments = files.map(({ id }) => ({ id }));
    this.outbox.set(clientMessageId, frame);
    saveOutbox(this.outbox);
    this.send(frame);
  }

  /** Chat messages of `groupId` still waiting for their ack. */
  pending(groupId) {
    return [...this.outbox.values()].filter((frame) => frame.groupId === groupId);
  }

  acked(clientMessageId) {
    if (clientMessageId && this.outbox.delete(clientMessageId)) saveOutbox(this.outbox);
  }

  /** Give up on a message (the server refused it for good). */
  drop(clientMessageId) {
    this.acked(clientMessageId);
  }

  cancel(groupId, vpId) {
    const frame = { type: 'cancel_execution', groupId };
    if (vpId) frame.vpId = vpId;
    this.sendControl(frame);
  }

  answer(groupId, requestId, answer) {
    this.sendControl({ type: 'ask_user_answer', groupId, requestId, answer });
  }
}

// The outbox survives a page reload (sessionStorage is per tab), so a message
// typed just before a reload is still delivered; the server ignores repeats
// of a clientMessageId.
function loadOutbox() {
  try {
    const saved = JSON.parse(sessionStorage.getItem(OUTBOX_KEY) || '[]');
    return new Map(saved.map((frame) => [frame.clientMessageId, frame]));
  } catch {
    return new Map();
  }
}

function saveOutbox(outbox) {
  try {
    sessionStorage.setItem(OUTBOX_KEY, JSON.stringify([...outbox.values()]));
  } catch {
    // Storage may be full or disabled; the in-memory outbox still works.
  }
}
