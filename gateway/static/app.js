// The web client: login, the group list, and the chat view of one group.
//
// Data flow: the HTTP API gives the user, the personas, the groups and a
// group's stored history (with the event-log position it reflects,
// `lastSeq`). The WebSocket then streams everything after that position:
// people's messages and hand-offs, VP output, status changes, questions.
// This module wires the views together; each concept lives in its own module.

import { mountAccount } from './account.js';
import { mountAdminPanel } from './adminpanel.js';
import { api } from './api.js';
import { AskDialog } from './ask.js';
import { AttachmentTray } from './attachments.js';
import { ChatHead } from './chathead.js';
import { Composer } from './composer.js';
import { Connection, connectionLabel } from './connection.js';
import { Conversations } from './conversations.js';
import { newId, toast } from './dom.js';
import { FilesMenu } from './files.js';
import { FrameRouter } from './frames.js';
import { GroupDialog } from './groupdialog.js';
import { mountHeadBar, showTitle } from './headbar.js';
import { mountMcp } from './mcp.js';
import { MembersPanel } from './members.js';
import { SettingsPanel } from './settings.js';
import { Inbox } from './inbox.js';
import { Mentions, peopleOf } from './mentions.js';
import { mountLogin, showLogin } from './login.js';
import { acceptingInvite } from './inviteaccept.js';
import { MessageOps } from './messageops.js';
import { HISTORY_PAGE, HistoryPager } from './pager.js';
import { SearchBox } from './search.js';
import { closeSidebar, mountDrawer, Sidebar } from './sidebar.js';
import { Liveness, markStale } from './liveness.js';
import { TaskCards } from './tasks.js';
import { presenceChip, Timeline } from './timeline.js';
import { QuotaMeter } from './quotameter.js';
import { Reactions } from './reactions.js';
import { Versions } from './versions.js';
import { ThreadPanel } from './threadpanel.js';

const LAST_GROUP_KEY = 'yeaft.lastGroup';
const BUSY = new Set(['queued', 'thinking', 'streaming', 'tool']);
const $ = (id) => document.getElementById(id);

const state = {
  me: '',
  personas: [],
  personaById: new Map(),
  groups: [],
  groupId: null,
  loading: false,
  loadToken: 0,
  presence: new Map(),
  hadDisconnect: false,
};

let connection = null;
const liveness = new Liveness();

/** {name, role} of a VP id, with a stand-in for ids the server did not list. */
function persona(id) {
  if (id === 'system') return { id, name: 'System', role: '' };
  if (id === 'all') return { id, name: 'Everyone', role: '' };
  return state.personaById.get(id) || { id, name: id, role: '', aliases: [] };
}

function currentGroup() {
  const group = state.groups.find((g) => g.id === state.groupId);
  return group || conversations.asGroup(state.groupId);
}

// -- views ------------------------------------------------------------------
const timeline = new Timeline({
  scroller: $('timeline-scroll'),
  list: $('timeline'),
  persona,
  onCancel: (vpId) => state.groupId && connection.cancel(state.groupId, vpId),
  onChange: () => updateStopAll(),
  onTurnEnd: (bubble) => {
    chatHead.refreshUsage();
    if (conversations.active) return; // read marks and late fetches are per group
    if (bubble.joinedLate && state.groupId) {
      const groupId = state.groupId;
      ops.fetchWholeReply(groupId, bubble, () => state.groupId === groupId);
    }
    if (bubble.messageId) inbox.read(state.groupId, bubble.messageId);
  },
  onDelete: (messageId, failed) => ops.deleteMessage(messageId, failed),
  onRegenerate: (bubble) => ops.regenerate(bubble),
  onBubble: (bubble) => taskCards.labelBubble(bubble),
  newMessages: $('new-messages'),
});

// Team mode: a card per task, under the message that started it (tasks.js).
const taskCards = new TaskCards({ timeline, persona, toast: (text, kind) => toast(text, kind) });

// "Load earlier messages", and a search hit older than the page shown.
const pager = new HistoryPager({ timeline, taskCards, groupId: () => state.groupId });
const reactions = new Reactions({ timeline, pager, groupId: () => (conversations.active ? null : state.groupId), toast });
new Versions({ timeline, groupId: () => (conversations.active ? null : state.groupId), toast });
const threads = new ThreadPanel({ timeline, persona, groupId: () => (conversations.active ? null : state.groupId), me: () => state.me, connection: () => connection, roster: () => (currentGroup()?.roster || []).map(persona), toast, reactions });

const ops = new MessageOps({
  groupId: () => (conversations.active ? null : state.groupId),
  timeline,
  toast: (text, kind) => toast(text, kind),
});

const inbox = new Inbox({ onChange: () => renderGroupChrome(), onSummary: (frame) => mentions.summary(frame) });
const mentions = new Mentions({
  timeline, me: () => state.me, open: openAt, button: $('notify-mentions'),
  groupName: (id) => state.groups.find((g) => g.id === id)?.name || id,
});

const search = new SearchBox({
  input: $('search-input'),
  results: $('search-results'),
  mentionsButton: $('show-mentions'),
  label: (author, role) => (role === 'assistant' ? persona(author).name : author),
  onOpen: (groupId, messageId, threadId) => {
    closeSidebar();
    openAt(groupId, messageId, threadId);
  },
});

const quotaMeter = new QuotaMeter($('composer'));
const composer = new Composer({
  form: $('composer'),
  input: $('message-input'),
  button: $('send-button'),
  menu: $('mention-menu'),
  roster: () => (currentGroup()?.roster || []).map(persona),
  people: () => (conversations.active ? [] : peopleOf(currentGroup(), state.me)),
  onSend: sendMessage,
});

const tray = new AttachmentTray({
  form: $('composer'),
  input: $('message-input'),
  groupId: () => conversations.active ? conversations.current : state.groupId,
  onError: (message) => toast(message),
});

const sidebar = new Sidebar({
  list: $('group-list'),
  form: $('new-group-form'),
  onSelect: (id) => {
    closeSidebar();
    selectGroup(id);
  },
  onCreate: createGroup,
});

// One-to-one conversations: a sidebar section of their own, shown in the same timeline.
const conversations = new Conversations({
  list: $('conversation-list'),
  form: $('new-conversation-form'),
  persona,
  toast: (message) => toast(message),
  onSelect: (id) => {
    closeSidebar();
    openConversation(id);
  },
  onGone: () => selectGroup(state.groups[0]?.id || null),
  onChange: () => renderGroupChrome(),
});

const askDialog = new AskDialog({
  dialog: $('ask-dialog'),
  persona,
  onAnswer: (question, answer) =>
    connection.answer(question.groupId || state.groupId, question.requestId, answer),
  onWaiting: (count) => {
    const button = $('ask-waiting');
    button.hidden = count === 0;
    button.textContent = count === 1 ? '1 question waiting' : `${count} questions waiting`;
  },
});

$('ask-waiting').addEventListener('click', () => askDialog.reopen());

const groupDialog = new GroupDialog({
  dialog: $('group-dialog'),
  personas: () => state.personas,
  persona,
  onChanged: async (group, reread) => {
    if (reread) await refreshGroups();
    else replaceGroup(group);
  },
  onDeleted: async (id) => {
    if (localStorage.getItem(LAST_GROUP_KEY) === id) localStorage.removeItem(LAST_GROUP_KEY);
    await refreshGroups();
    if (state.groupId === id) selectGroup(state.groups[0]?.id || null);
  },
});

const membersPanel = new MembersPanel({
  dialog: $('members-dialog'),
  button: $('members-button'),
  me: () => state.me,
  onLeft: (id) => dropGroup(id),
});

const settingsPanel = new SettingsPanel({
  dialog: $('settings-dialog'),
  button: $('settings-button'),
  me: () => state.me,
  persona,
  onSaved: (group) => replaceGroup(group),
});

const filesMenu = new FilesMenu($('files-menu'), $('files-list'));

// The header's usage total and Export for what is open; a conversation's own VP, model and Settings.
const chatHead = new ChatHead({ me: () => state.me, onSaved: () => conversations.refresh() });

/** A group the user lost (left, removed, deleted): out of the list, and out of view. */
function dropGroup(id) {
  state.groups = state.groups.filter((g) => g.id !== id);
  if (localStorage.getItem(LAST_GROUP_KEY) === id) localStorage.removeItem(LAST_GROUP_KEY);
  if (state.groupId === id) selectGroup(state.groups[0]?.id || null);
  else renderGroupChrome();
}

// -- login (see login.js) -----------------------------------------------------
function leaveApp(message) {
  state.loadToken += 1; // a history load still under way is now moot
  connection?.stop();
  connection = null;
  state.groupId = null;
  askDialog.reset();
  timeline.reset();
  inbox.stop();
  search.clear();
  showLogin(message);
}
mountMcp();
mountAccount();
mountAdminPanel();
mountLogin({ onLogin: enterApp, onLogout: () => leaveApp('') });
mountDrawer();
mountHeadBar();

// -- entering the app -------------------------------------------------------
async function enterApp(username) {
  state.me = username;
  timeline.me = username;
  $('login-view').hidden = true;
  $('app-view').hidden = false;
  $('app-view').querySelector('[data-testid="me"]').textContent = username;
  const [personas, groups, limits] = await Promise.all([
    api.personas(),
    api.groups(),
    api.limits().catch(() => null),
  ]);
  // Sorted by name, so every picker lists them the same way.
  state.personas = (personas || []).sort((a, b) => a.name.localeCompare(b.name));
  composer.setLimits(limits);
  state.personaById = new Map(state.personas.map((p) => [p.id, p]));
  state.groups = groups || [];
  sidebar.setPersonas(state.personas);
  conversations.setPersonas(state.personas);
  // Before the connection: once it is live, the page is ready for use.
  await conversations.refresh();
  startConnection();
  ops.dropOversized(connection, limits?.frameMaxBytes);
  inbox.start();
  if (conversations.fromHash()) {
    openConversation(conversations.fromHash());
    return;
  }
  const wanted = groupFromHash() || localStorage.getItem(LAST_GROUP_KEY);
  const first = state.groups.find((g) => g.id === wanted) || state.groups[0];
  if (!first) $('new-group').open = true;
  selectGroup(first ? first.id : null);
}

function startConnection() {
  const scheme = window.location.protocol === 'https:' ? 'wss' : 'ws';
  connection = new Connection({
    url: `${scheme}://${window.location.host}/ws?client=web`,
    onFrame: (frame) => frames.handle(frame),
    onState: showConnection,
    onAuthExpired: () => leaveApp('Your session has expired: log in again.'),
  });
  connection.start();
}

function showConnection(connState, info = {}) {
  const node = $('connection');
  if (connState === 'reconnecting') state.hadDisconnect = true;
  node.dataset.state = connState;
  if (connection) conversations.connectionState(connState, connection);
  inbox.connectionState(connState);
  node.querySelector('.connection-text').textContent = connectionLabel(connState, info, state.hadDisconnect);
  if (connState === 'live') state.hadDisconnect = false;
}

// -- groups -----------------------------------------------------------------
function groupFromHash() {
  const match = window.location.hash.match(/^#g=([A-Za-z0-9_-]+)$/);
  return match ? match[1] : null;
}

window.addEventListener('hashchange', () => {
  const id = groupFromHash();
  if (id && id !== state.groupId && state.groups.some((g) => g.id === id)) selectGroup(id);
});

async function refreshGroups() {
  state.groups = (await api.groups()) || [];
  renderGroupChrome();
}

function replaceGroup(group) {
  const index = state.groups.findIndex((g) => g.id === group.id);
  if (index >= 0) state.groups[index] = group;
  else state.groups.push(group);
  renderGroupChrome();
  groupDialog.update(group);
}

async function createGroup(name, roster) {
  const group = await api.createGroup(name, roster);
  await refreshGroups();
  const id = group?.id || state.groups[state.groups.length - 1]?.id;
  if (id) selectGroup(id);
}

/** The sidebar, the title and the presence bar of the current group. */
function renderGroupChrome() {
  sidebar.render(state.groups, state.groupId, (id) => persona(id).name, inbox.summaries);
  const group = currentGroup();
  showTitle(group?.name);
  $('group-menu-button').disabled = !group;
  $('empty-state').hidden = Boolean(group);
  $('chat').classList.toggle('has-group', Boolean(group));
  // A conversation is a group underneath, but has none of a group's people or settings.
  const target = group ? { id: group.id, conversation: conversations.active } : null;
  membersPanel.update(conversations.active ? null : group);
  settingsPanel.update(conversations.active ? null : group);
  chatHead.update(target);
  filesMenu.update(target);
  const roster = group?.roster || [];
  $('presence-bar').replaceChildren(
    ...roster.map((id) => {
      const chip = presenceChip(id, persona(id), (vpId) => composer.insertMention(vpId));
      chip.dataset.state = state.presence.get(id) || 'idle';
      return chip;
    }),
  );
  updateStopAll();
}

/** Open a group: its stored history first, then the live stream after it. */
async function selectGroup(groupId) {
  if (state.groupId && connection) connection.unsubscribe(state.groupId);
  conversations.close(connection);
  state.groupId = groupId;
  state.presence = new Map();
  liveness.forget();
  pager.reset();
  const token = ++state.loadToken;
  timeline.reset();
  askDialog.reset();
  renderGroupChrome();
  composer.setEnabled(Boolean(groupId));
  if (!groupId) return;
  localStorage.setItem(LAST_GROUP_KEY, groupId);
  if (groupFromHash() !== groupId) history.replaceState(null, '', `#g=${groupId}`);
  state.loading = true;
  let page;
  let tasks;
  try {
    [page, tasks] = await Promise.all([
      api.messages(groupId, { limit: HISTORY_PAGE }),
      taskCards.fetch(groupId),
    ]);
  } catch (err) {
    if (token !== state.loadToken) return;
    state.loading = false;
    toast(`Could not load the history: ${err.message}`);
    if (err.status === 401) leaveApp('Your session has expired: log in again.');
    if (err.status === 404 || err.status === 403) await refreshGroups();
    return;
  }
  if (token !== state.loadToken) return;
  state.loading = false;
  const messages = page?.messages || [];
  timeline.renderHistory(messages);
  taskCards.show(tasks);
  const ended = new Set(messages.map((m) => m.meta?.turnId).filter(Boolean));
  askDialog.restore(groupId, ended);
  pager.loaded(page, messages);
  // Messages sent but not acknowledged before a reload are shown (and
  // resent by the connection) unless the history proves they were stored.
  const stored = new Set(messages.map((m) => m.meta?.clientMessageId).filter(Boolean));
  for (const frame of connection.pending(groupId)) {
    if (stored.has(frame.clientMessageId)) connection.acked(frame.clientMessageId);
    else timeline.addPending(frame);
  }
  connection.subscribe(groupId, typeof page?.lastSeq === 'number' ? page.lastSeq : undefined);
  composer.focus();
  chatHead.refreshUsage();
  const newest = messages[messages.length - 1];
  if (newest) inbox.read(groupId, newest.id);
}

/** Open a one-to-one conversation in the chat view (see conversations.js). */
function openConversation(id) {
  if (state.groupId && connection) connection.unsubscribe(state.groupId);
  conversations.close(connection);
  state.groupId = id;
  state.presence = new Map();
  liveness.forget();
  const token = ++state.loadToken;
  timeline.reset();
  askDialog.reset();
  pager.reset();
  composer.setEnabled(true);
  conversations.open(id, {
    timeline,
    connection,
    isCurrent: () => token === state.loadToken,
    setLoading: (loading) => {
      state.loading = loading;
    },
  });
  renderGroupChrome();
  composer.focus();
}

$('group-menu-button').addEventListener('click', () => {
  if (conversations.active) return conversations.remove(state.groupId);
  const group = currentGroup();
  if (group) groupDialog.open(group);
});

// -- sending ----------------------------------------------------------------
function sendMessage(text, mentions) {
  if (!state.groupId || !connection) return false;
  if (tray.busy()) {
    toast('Wait until the files have uploaded.', 'info');
    return false;
  }
  const files = tray.take();
  if (conversations.active) return conversations.send(text, connection, timeline, files);
  const clientMessageId = newId('m');
  timeline.addPending({ text, clientMessageId, attachments: files });
  connection.sendChat(state.groupId, text, mentions, clientMessageId, files);
  return true;
}

$('stop-all').addEventListener('click', () => {
  if (!state.groupId) return;
  for (const bubble of timeline.activeTurns()) bubble.setStatus('cancelling');
  connection.cancel(state.groupId);
});

setInterval(() => markStale($('presence-bar'), liveness, BUSY), 1000);

function updateStopAll() {
  const busy = timeline.activeTurns().length > 0 || [...state.presence.values()].some((s) => BUSY.has(s));
  $('stop-all').hidden = !busy;
}

// -- search hits ------------------------------------------------------------
/** Open a group at one message (a search hit); a reply in a thread: at its root, the thread open at it. */
async function openAt(groupId, messageId, threadId = null) {
  if (groupId !== state.groupId || state.loading) await selectGroup(groupId);
  await pager.find(groupId, threadId || messageId);
  if (threadId && groupId === state.groupId) await threads.openAt(threadId, messageId);
}

const frames = new FrameRouter({
  state, quotaMeter, timeline, conversations, inbox, taskCards, liveness, askDialog, membersPanel, chatHead,
  presenceBar: $('presence-bar'),
  connection: () => connection,
  updateStopAll, dropGroup, replaceGroup, renderGroupChrome,
  errors: { state, ops, timeline, toast, connection: () => connection, selectGroup, leaveApp, refreshGroups },
});

// -- start ------------------------------------------------------------------
async function boot() {
  let me;
  try {
    me = await api.me();
  } catch (err) {
    showLogin(err.status === 401 || err.status === 403 ? '' : err.message);
    return;
  }
  try {
    await enterApp(me?.username || me?.name || me?.user || '');
  } catch (err) {
    if (err.status === 401) leaveApp('Your session has expired: log in again.');
    else toast(err.message);
  }
}

if (!acceptingInvite()) boot();
