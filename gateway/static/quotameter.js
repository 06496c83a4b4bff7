// The quota meter in the composer: "62% of today's budget".
//
// The server pushes a `quota_meter` frame (docs/protocol.md) when this tab
// subscribes to a group and after each turn of that group that spent
// something; it names the tightest of the person's own quota and the
// group's budgets, daily and monthly. Nothing is polled. A subscription to
// another group hides the meter until that group's frame comes (none comes
// when no limit applies there).
import { el } from './dom.js';

// At or past these shares the meter turns amber, then red.
const WARN_AT = 80;
const FULL_AT = 100;

export class QuotaMeter {
  /** Put the (hidden) meter into `composer`, before its hint line. */
  constructor(composer) {
    this.meters = new Map();
    this.current = null;
    this.bar = el('span', { class: 'quota-meter-fill' });
    this.label = el('span', { class: 'quota-meter-text', testid: 'quota-meter-text' });
    this.root = el(
      'div',
      { class: 'quota-meter', testid: 'quota-meter', role: 'meter', 'aria-valuemin': '0', 'aria-valuemax': '100' },
      el('span', { class: 'quota-meter-track' }, this.bar),
      this.label,
    );
    this.root.hidden = true;
    const hint = composer.querySelector('.composer-hint');
    composer.insertBefore(this.root, hint);
  }

  /** Every server frame passes here; the meter takes what concerns it. */
  frame(frame) {
    if (frame.type === 'quota_meter') {
      this.meters.set(frame.groupId, frame);
      if (this.current === null) this.current = frame.groupId;
    } else if (frame.type === 'group_update' && frame.action === 'subscribed' && frame.group?.id) {
      // What is known of this group is stale: its fresh meter follows the subscription.
      this.current = frame.group.id;
      this.meters.delete(frame.group.id);
    } else if (frame.type === 'session_ready' && frame.conversationId) {
      this.current = frame.conversationId;
    } else {
      return;
    }
    this.render();
  }

  render() {
    const meter = this.meters.get(this.current);
    if (!meter || meter.percent === null || meter.percent === undefined) {
      this.root.hidden = true;
      return;
    }
    const percent = Number(meter.percent);
    this.root.hidden = false;
    this.root.dataset.level = percent >= FULL_AT ? 'full' : percent >= WARN_AT ? 'warn' : 'ok';
    this.root.dataset.scope = meter.scope || '';
    this.root.setAttribute('aria-valuenow', String(Math.min(percent, 100)));
    this.bar.style.width = `${Math.min(percent, 100)}%`;
    this.label.textContent = meter.text || `${percent}% of the budget`;
    this.root.title = describe(meter);
  }
}

function describe(meter) {
  const amount = (v) => (meter.unit === 'usd' ? `$${Number(v).toFixed(2)}` : `${Math.round(v).toLocaleString()} tokens`);
  const whose = meter.scope === 'group' ? "the group's" : 'your own';
  const when = meter.period === 'month' ? 'this month' : 'today (UTC)';
  return `${amount(meter.spent)} of ${amount(meter.limit)}: ${whose} budget for ${when}`;
}
