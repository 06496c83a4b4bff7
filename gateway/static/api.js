// The HTTP API. Authentication rides on the HttpOnly session cookie that
// login sets, so this module never sees or stores a token.

/** An HTTP call that failed; `code` is the server's error code when it sent one. */
export class ApiError extends Error {
  constructor(status, code, message, field = null) {
    super(message);
    this.status = status;
    this.code = code;
    this.field = field;
  }
}

/** One JSON request to the HTTP API; an ApiError (with the server's code) when it fails. */
export async function request(method, path, body) {
  const init = { method, credentials: 'same-origin', headers: { Accept: 'application/json' } };
  if (body !== undefined) {
    init.headers['Content-Type'] = 'application/json';
    init.body = JSON.stringify(body);
  }
  let response;
  try {
    response = await fetch(path, init);
  } catch (err) {
    throw new ApiError(0, 'network', `The server cannot be reached (${err.message}).`);
  }
  const text = await response.text();
  let data = null;
  if (text) {
    try {
      data = JSON.parse(text);
    } catch {
      data = null;
    }
  }
  if (!response.ok) {
    const error = data && typeof data === 'object' ? data.error || data.detail : null;
    const code = (error && error.code) || `http_${response.status}`;
    let message = (error && error.message) || (typeof error === 'string' ? error : '');
    if (!message) message = `${method} ${path} failed (HTTP ${response.status})`;
    throw new ApiError(response.status, code, message, (error && error.field) || null);
  }
  return data;
}

const enc = encodeURIComponent;

/** A list the server may send bare or wrapped (`{groups: [...]}`). */
function listOf(data, key) {
  if (Array.isArray(data)) return data;
  if (data && Array.isArray(data[key])) return data[key];
  return [];
}

export const api = {
  login: (username, password) => request('POST', '/api/login', { username, password }),
  logout: () => request('POST', '/api/logout'),
  me: () => request('GET', '/api/me'),
  personas: async () => listOf(await request('GET', '/api/personas'), 'personas'),
  groups: async () => listOf(await request('GET', '/api/groups'), 'groups'),
  createGroup: (name, roster, defaultVpId) => {
    const body = { name, roster };
    if (defaultVpId) body.defaultVpId = defaultVpId;
    return request('POST', '/api/groups', body);
  },
  renameGroup: (id, name) => request('PATCH', `/api/groups/${enc(id)}`, { name }),
  deleteGroup: (id) => request('DELETE', `/api/groups/${enc(id)}`),
  addVp: (id, vpId) => request('POST', `/api/groups/${enc(id)}/vps`, { vpId }),
  removeVp: (id, vpId) => request('DELETE', `/api/groups/${enc(id)}/vps/${enc(vpId)}`),
  invite: (id, username) => request('POST', `/api/groups/${enc(id)}/members`, { username }),
  removeMember: (id, username) =>
    request('DELETE', `/api/groups/${enc(id)}/members/${enc(username)}`),
  transferOwnership: (id, username) => request('PUT', `/api/groups/${enc(id)}/owner`, { username }),
  leaveGroup: (id) => request('POST', `/api/groups/${enc(id)}/leave`),
  updateSettings: (id, body) => request('PATCH', `/api/groups/${enc(id)}/settings`, body),
  inbox: () => request('GET', '/api/inbox'),
  markRead: (id, messageId) => request('POST', `/api/groups/${enc(id)}/read`, { messageId }),
  search: (q) => request('GET', `/api/search?q=${enc(q)}&limit=50`),
  mentions: () => request('GET', '/api/mentions?limit=50'),
  usage: (id) => request('GET', `/api/groups/${enc(id)}/usage`),
  limits: () => request('GET', '/api/limits'),
  deleteMessage: (id, messageId) => request('DELETE', `/api/groups/${enc(id)}/messages/${enc(messageId)}`),
  regenerate: (id, messageId) =>
    request('POST', `/api/groups/${enc(id)}/messages/${enc(messageId)}/regenerate`),
  // Team mode (gateway/tasks_http.py): a group's tasks, the person's verdict, skill drafts.
  tasks: async (id) => listOf(await request('GET', `/api/groups/${enc(id)}/tasks`), 'tasks'),
  task: (id, taskId) => request('GET', `/api/groups/${enc(id)}/tasks/${enc(taskId)}`),
  acceptTask: (id, taskId) => request('POST', `/api/groups/${enc(id)}/tasks/${enc(taskId)}/accept`),
  reviseTask: (id, taskId, text) =>
    request('POST', `/api/groups/${enc(id)}/tasks/${enc(taskId)}/revise`, { text }),
  abandonTask: (id, taskId) => request('POST', `/api/groups/${enc(id)}/tasks/${enc(taskId)}/abandon`),
  skills: async () => listOf(await request('GET', '/api/skills'), 'skills'),
  drafts: async () => listOf(await request('GET', '/api/skills/drafts'), 'drafts'),
  publishDraft: (draftId) => request('POST', `/api/skills/drafts/${enc(draftId)}/publish`),
  messages: (id, { before, limit } = {}) => {
    const query = new URLSearchParams();
    if (before) query.set('before', before);
    if (limit) query.set('limit', String(limit));
    const qs = query.toString();
    return request('GET', `/api/groups/${enc(id)}/messages${qs ? `?${qs}` : ''}`);
  },
};
