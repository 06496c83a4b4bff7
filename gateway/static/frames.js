// Frames from the server, each handed to the part of the page it is for.
//
// `FrameRouter` is the connection's `onFrame`: a group's frames go to the
// timeline, its task cards, the presence bar and the question dialog only
// while that group is open (and its history loaded); the inbox, the quota
// meter and conversations see theirs whatever is open; `group_update`
// changes the group list. Its dependencies come from app.js, by name.

import { toast } from './dom.js';
import { handleServerError } from './servererrors.js';

export class FrameRouter {
  /**
   * `d` holds the page's parts (state, timeline, inbox, ...), the functions
   * that change the group list (`dropGroup`, `replaceGroup`,
   * `renderGroupChrome`, `updateStopAll`), `connection()` and `errors` (what
   * servererrors.js needs).
   */
  constructor(d) {
    this.d = d;
  }

  handle(frame) {
    const { state, quotaMeter, timeline, conversations, inbox, taskCards, liveness } = this.d;
    const { askDialog, membersPanel, presenceBar, updateStopAll, dropGroup } = this.d;
    quotaMeter.frame(frame);
    switch (frame.type) {
      case 'group_message':
        if (frame.groupId !== state.groupId || state.loading) return;
        timeline.message(frame);
        if (conversations.active) break;
        inbox.read(frame.groupId, frame.messageId);
        inbox.saw(frame.groupId, {
          messageId: frame.messageId,
          author: frame.author,
          role: frame.role,
          text: frame.text,
          ts: frame.ts,
        });
        break;
      case 'message_changed':
        if (frame.groupId !== state.groupId || state.loading) return;
        timeline.changed(frame);
        break;
      case 'task_changed':
        if (frame.groupId !== state.groupId || state.loading) return;
        taskCards.changed(frame);
        break;
      case 'claude_output': {
        const output = conversations.toGroupFrame(frame, this.d.connection());
        if (output) this.handle(output);
        break;
      }
      case 'session_ready':
      case 'conversation_deleted':
        conversations.frame(frame);
        break;
      case 'yeaft_output':
        if (frame.groupId !== state.groupId || state.loading) return;
        liveness.alive(frame.vpId);
        timeline.output(frame);
        if (frame.data?.type === 'result') askDialog.forgetTurn(frame.turnId);
        break;
      case 'agent_status': {
        if (frame.groupId !== state.groupId || state.loading) return;
        const shown = liveness.status(presenceBar, frame);
        if (shown.vpId) state.presence.set(shown.vpId, shown.state);
        timeline.status(shown);
        updateStopAll();
        break;
      }
      case 'ask_user_question':
        if (!frame.groupId || frame.groupId === state.groupId) askDialog.ask(frame);
        break;
      case 'ack':
        timeline.ack(frame.clientMessageId, frame.messageId);
        break;
      case 'group_update':
        this.groupUpdate(frame);
        break;
      case 'presence':
        membersPanel.presence(frame.groupId, frame.online);
        break;
      case 'removed':
        toast(frame.message, 'info');
        dropGroup(frame.groupId);
        break;
      case 'error':
        // An answer that did not fit its question: the question is still open.
        if (frame.field === 'answer' && frame.requestId) askDialog.refused(frame.requestId);
        handleServerError(frame, this.d.errors);
        break;
      default:
        break;
    }
  }

  /** The server's word on a group: listed, subscribed, changed or deleted. */
  groupUpdate(frame) {
    const { state, conversations, chatHead, membersPanel, dropGroup, replaceGroup } = this.d;
    if (frame.action === 'list' && Array.isArray(frame.groups)) {
      state.groups = frame.groups;
      this.d.renderGroupChrome();
      return;
    }
    const group = frame.group;
    if (!group || !group.id) return;
    // A conversation's settings changed (in this tab or another): its header reads them again.
    if (conversations.has(group.id)) {
      chatHead.changed(group.id);
      return;
    }
    if (frame.action === 'subscribed' && Array.isArray(frame.online)) {
      membersPanel.presence(group.id, frame.online);
    }
    if (['deleted', 'removed', 'left'].includes(frame.action)) {
      dropGroup(group.id);
      return;
    }
    if (group.name) replaceGroup(group);
  }
}
