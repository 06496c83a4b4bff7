"""The Redis store's Lua scripts: each runs alone on the server, so each is atomic.

Every script touches the keys of one group only (they share the group's
``{G}`` hash tag, so a Redis Cluster keeps them in one slot). Key and
argument layouts are given above each script; the key names are in
``store.redis``.
"""

# KEYS: group, index. ARGV: group JSON, group id.
CREATE_GROUP = """
if redis.call('SET', KEYS[1], ARGV[1], 'NX') then
  redis.call('SADD', KEYS[2], ARGV[2])
  return 1
end
return 0
"""

# Records turns: KEYS[k..k+3] are turns, tphase, topen, ttrig; ARGV[i..last]
# holds (turn id, trigger id, record JSON) triplets. A turn id that already
# has a phase keeps it (and its record).
RECORD_TURNS = """
local function record_turns(k, i, last)
  for j = i, last, 3 do
    local id = ARGV[j]
    if redis.call('HSETNX', KEYS[k + 1], id, 'requested') == 1 then
      redis.call('HSET', KEYS[k], id, ARGV[j + 2])
      redis.call('SADD', KEYS[k + 2], id)
      local known = redis.call('HGET', KEYS[k + 3], ARGV[j + 1])
      if known then known = known .. ' ' .. id else known = id end
      redis.call('HSET', KEYS[k + 3], ARGV[j + 1], known)
    end
  end
end
"""


# Appends one event: KEYS[k] is eseq, KEYS[k + 1] events; ARGV[i] is the
# frame JSON without seq (a non-empty object), ARGV[i + 1] the retention, and
# the header's field names and values follow, up to ARGV[last]. Returns the
# new seq.
# The seq is spliced into the JSON text rather than decoded and re-encoded with
# cjson, which would turn empty lists into objects and reformat numbers; it is
# the same splice as store.events.with_seq.
APPEND_ENTRY = """
local function append_entry(k, i, last)
  local seq = redis.call('INCR', KEYS[k])
  local entry = {'d', '{"seq":' .. seq .. ',' .. string.sub(ARGV[i], 2)}
  for j = i + 2, last do
    entry[#entry + 1] = ARGV[j]
  end
  redis.call('XADD', KEYS[k + 1], 'MAXLEN', ARGV[i + 1], seq .. '-0', unpack(entry))
  return seq
end
"""

# KEYS: msgs, order, mpos, cmid, the turn keys, eseq, events, terms, pments.
# ARGV: message id, message JSON, clientMessageId or '', the count n of turn
# arguments, the n arguments of the turns to record with it, the count p of
# the message's search postings, the p postings, the count q of its mention
# postings (store.redis_mentions), the q postings, then the frame that
# announces the message (JSON without seq, retention, header fields) or
# nothing. Returns {1, json} when stored, {0, stored json} for a repeat
# (which records, indexes and announces nothing).
APPEND_MESSAGE = (
    RECORD_TURNS
    + APPEND_ENTRY
    + """
local known = nil
if ARGV[3] ~= '' then
  known = redis.call('HGET', KEYS[4], ARGV[3])
end
if not known then
  known = ARGV[1]
end
local stored = redis.call('HGET', KEYS[1], known)
if stored then
  return {0, stored}
end
local pos = redis.call('INCR', KEYS[3])
redis.call('ZADD', KEYS[2], pos, ARGV[1])
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
if ARGV[3] ~= '' then
  redis.call('HSET', KEYS[4], ARGV[3], ARGV[1])
end
local n = tonumber(ARGV[4])
record_turns(5, 5, 4 + n)
local p = tonumber(ARGV[5 + n])
for j = 6 + n, 5 + n + p do
  redis.call('ZADD', KEYS[11], 0, ARGV[j])
end
local q = tonumber(ARGV[6 + n + p])
for j = 7 + n + p, 6 + n + p + q do
  redis.call('ZADD', KEYS[12], 0, ARGV[j])
end
if #ARGV > 6 + n + p + q then append_entry(9, 7 + n + p + q, #ARGV) end
return {1, ARGV[2]}
"""
)

# KEYS: eseq, events. ARGV: frame JSON without seq, retention, header fields.
APPEND_EVENT = (
    APPEND_ENTRY
    + """
return append_entry(1, 1, #ARGV)
"""
)

# KEYS: turns, tphase, topen, ttrig. ARGV: (turn id, trigger id, record JSON) repeated.
ADD_TURNS = (
    RECORD_TURNS
    + """
record_turns(1, 1, #ARGV)
return 1
"""
)

# KEYS: tphase, eseq, events. ARGV: turn id, frame JSON without seq (or '' for
# none), retention, then the header's field names and values.
# 0 when the turn is finished (nothing appended), else 1.
START_TURN = (
    APPEND_ENTRY
    + """
local phase = redis.call('HGET', KEYS[1], ARGV[1])
if phase and string.sub(phase, 1, 8) == 'finished' then return 0 end
if phase then redis.call('HSET', KEYS[1], ARGV[1], 'started') end
if ARGV[2] ~= '' then append_entry(2, 2, #ARGV) end
return 1
"""
)

# Counts a turn's usage once: KEYS[k] is uturns, KEYS[k + 1] usage, KEYS[k + 2]
# budget, KEYS[k + 3] the usage rows of the row's month (``store.redis_quotas``);
# ARGV[i] is the turn id, then input tokens, output tokens, cost, the count n
# of budget accounts to charge with it, the n accounts, and the usage row's
# field ('' for none). Returns 1 if counted now (else 0) and the index of
# the argument after them.
COUNT_USAGE = """
local function count_usage(k, i)
  local n = tonumber(ARGV[i + 4])
  local row = ARGV[i + 5 + n]
  local counted = redis.call('SADD', KEYS[k], ARGV[i])
  if counted == 1 then
    redis.call('HINCRBY', KEYS[k + 1], 'turns', 1)
    redis.call('HINCRBY', KEYS[k + 1], 'input', ARGV[i + 1])
    redis.call('HINCRBY', KEYS[k + 1], 'output', ARGV[i + 2])
    redis.call('HINCRBYFLOAT', KEYS[k + 1], 'cost', ARGV[i + 3])
    local tokens = tonumber(ARGV[i + 1]) + tonumber(ARGV[i + 2])
    for a = i + 5, i + 4 + n do
      redis.call('HINCRBY', KEYS[k + 2], ARGV[a] .. '|st', tokens)
      redis.call('HINCRBYFLOAT', KEYS[k + 2], ARGV[a] .. '|su', ARGV[i + 3])
    end
    if row ~= '' then
      redis.call('HINCRBY', KEYS[k + 3], row .. '\\031i', ARGV[i + 1])
      redis.call('HINCRBY', KEYS[k + 3], row .. '\\031o', ARGV[i + 2])
      redis.call('HINCRBYFLOAT', KEYS[k + 3], row .. '\\031u', ARGV[i + 3])
    end
  end
  return counted, i + 6 + n
end
"""

# KEYS: uturns, usage, budget, urows. ARGV: as count_usage's. 1 if counted now.
ADD_USAGE = (
    COUNT_USAGE
    + """
return (count_usage(1, 1))
"""
)

# KEYS: tphase, topen, eseq, events, uturns, usage, budget, urows. ARGV: end, then
# the turn id with the usage to count (as count_usage's) or the turn id and
# one '', then each frame to append: the count m of its header values, its
# JSON without seq, the retention and the m header values. The usage is
# counted whether or not the turn was finished before. Returns -1 when it was
# (nothing appended), else the first frame's seq (0 without a frame).
FINISH_TURN = (
    APPEND_ENTRY
    + COUNT_USAGE
    + """
local j = 4
if ARGV[3] ~= '' then
  local _
  _, j = count_usage(5, 2)
end
local phase = redis.call('HGET', KEYS[1], ARGV[2])
if phase and string.sub(phase, 1, 8) == 'finished' then return -1 end
local seq = 0
while j <= #ARGV do
  local m = tonumber(ARGV[j])
  local appended = append_entry(3, j + 1, j + 2 + m)
  if seq == 0 then seq = appended end
  j = j + 3 + m
end
redis.call('HSET', KEYS[1], ARGV[2], 'finished:' .. ARGV[1])
redis.call('SREM', KEYS[2], ARGV[2])
return seq
"""
)

# KEYS: eseq, events. ARGV: first wanted id, count.
# Returns {last_seq, first_seq, entries}, all from one consistent moment.
READ_EVENTS = """
local last = tonumber(redis.call('GET', KEYS[1]) or '0')
local first = 0
local head = redis.call('XRANGE', KEYS[2], '-', '+', 'COUNT', 1)
if #head > 0 then
  first = tonumber(string.match(head[1][1], '^(%d+)'))
end
local entries = redis.call('XRANGE', KEYS[2], ARGV[1], '+', 'COUNT', ARGV[2])
return {last, first, entries}
"""
