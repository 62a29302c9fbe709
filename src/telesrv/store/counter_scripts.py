"""The Lua scripts of the counters and rate limits (``counters.py``,
``rate_limits.py``), as text.

Each runs atomically in Redis. The allocation, the rate check and the send's claim are
functions that the scripts are made of, so the script that takes a send's claim and
its pts together runs the same code as the scripts that take each alone.
"""

from __future__ import annotations

MISSING_PTS = 1
MISSING_BOX = 2
GUARD_ABSENT = 4
NO_FLOOR = -1

# allocate(pts key, box id key, guard key (the no-blocks mark), blocks-changed key,
# n_pts, n_box, pts floor, box floor (-1: none), guard required ('1'/'0'), set the
# mark ('1'/'0'), the mark's ttl in seconds). Returns {missing mask, last pts, last box
# id}; counters change only when the mask is 0. A required guard key that is absent
# stops the allocation (mask 4): the caller must check something in PostgreSQL first.
# The mark is set only while the blocks-changed key is absent: the caller read "blocks
# nobody" from PostgreSQL a moment ago, and a block that committed since (its hooks
# leave that key for as long as a mark lives) must not find its mark put back after it
# dropped it.
_ALLOCATE_FUNCTION = """
local function allocate(pts_key, box_key, guard_key, changed_key, n_pts, n_box,
                        pts_floor, box_floor, guard, mark, mark_ttl)
  if guard == '1' and redis.call('EXISTS', guard_key) == 0 then
    return {4, 0, 0}
  end
  if mark == '1' and redis.call('EXISTS', changed_key) == 0 then
    redis.call('SET', guard_key, 1, 'EX', mark_ttl)
  end
  local missing = 0
  if n_pts > 0 and pts_floor < 0 and redis.call('EXISTS', pts_key) == 0 then
    missing = missing + 1
  end
  if n_box > 0 and box_floor < 0 and redis.call('EXISTS', box_key) == 0 then
    missing = missing + 2
  end
  if missing ~= 0 then
    return {missing, 0, 0}
  end
  local function advance(key, n, floor)
    if n == 0 then
      return 0
    end
    if floor >= 0 then
      local current = tonumber(redis.call('GET', key) or '0')
      if current < floor then
        redis.call('SET', key, floor)
      end
    end
    return redis.call('INCRBY', key, n)
  end
  -- The box id first: a script stopped by an error keeps what it wrote before, and a
  -- box id taken for nothing is only a gap in message ids, while a pts taken for
  -- nothing is a hole that no caller knows of (the error reply says nothing was taken).
  local last_box = advance(box_key, n_box, box_floor)
  return {0, advance(pts_key, n_pts, pts_floor), last_box}
end
"""

# KEYS: pts key, box id key, guard key, blocks-changed key. ARGV: n_pts, n_box, pts
# floor, box floor, guard required, set the mark, the mark's ttl (as allocate).
ALLOCATE_LUA = (
    _ALLOCATE_FUNCTION
    + """
return allocate(KEYS[1], KEYS[2], KEYS[3], KEYS[4], tonumber(ARGV[1]), tonumber(ARGV[2]),
                tonumber(ARGV[3]), tonumber(ARGV[4]), ARGV[5], ARGV[6], tonumber(ARGV[7]))
"""
)

# Sliding-window log: one sorted-set member per accepted send, scored in ms by Redis's
# own clock (one clock for every server process). Rejected attempts are not logged.
# check_rate(key, limit, window ms, n): n sends (n >= 1) are accepted while they fit
# under the limit, or all at once into an empty window (so a batch larger than the
# whole limit can still go, and then fills the window). Returns 0 when accepted, else
# the ms until enough entries expire for n sends to be.
_CHECK_RATE_FUNCTION = """
local function check_rate(key, limit, window, n)
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  redis.call('ZREMRANGEBYSCORE', key, '-inf', now - window)
  local count = redis.call('ZCARD', key)
  if count > 0 and count + n > limit then
    local keep = math.max(0, limit - n)
    local expiring = redis.call('ZRANGE', key, count - keep - 1, count - keep - 1, 'WITHSCORES')
    return tonumber(expiring[2]) + window - now
  end
  for i = 1, n do
    redis.call('ZADD', key, now, t[1] .. '.' .. t[2] .. ':' .. (count + i))
  end
  redis.call('PEXPIRE', key, window)
  return 0
end
"""
# KEYS: the log. ARGV: limit, window ms, n (default 1).
RATE_LIMIT_LUA = (
    _CHECK_RATE_FUNCTION
    + """
return check_rate(KEYS[1], tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3] or '1'))
"""
)

# claim(the log, the claim, the sender's claims-since mark, limit (0: none), window ms,
# claim ttl ms): one send's rate check and its (sender, random_id) claim (the keys are
# in the sender's slot). Returns {wait ms, claimed 1/0, whole 1/0}. A refused send never
# takes the claim; an accepted one is counted whether or not the claim was free (a retry
# counts as a send). The mark holds when (Redis's clock, ms) this Redis began keeping
# the sender's claims: a Redis that restarted or was flushed has lost the claims of
# sends that committed before, so until a whole claim ttl has passed since the mark
# ("whole" 0) a free claim does not prove that no attempt came before.
_CLAIM_FUNCTION = (
    _CHECK_RATE_FUNCTION
    + """
local function claim(log_key, claim_key, since_key, limit, window, ttl)
  if limit > 0 then
    local wait = check_rate(log_key, limit, window, 1)
    if wait > 0 then
      return {wait, 0, 0}
    end
  end
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  local since = tonumber(redis.call('GET', since_key) or '')
  if not since then
    since = now
    redis.call('SET', since_key, now)
  end
  local whole = 0
  if now - since >= ttl then
    whole = 1
  end
  if redis.call('SET', claim_key, 1, 'NX', 'PX', ttl) then
    return {0, 1, whole}
  end
  return {0, 0, whole}
end
"""
)
# KEYS: the log, the claim, the claims-since mark. ARGV: limit, window ms, claim ttl ms.
RATE_AND_CLAIM_LUA = (
    _CLAIM_FUNCTION
    + """
return claim(KEYS[1], KEYS[2], KEYS[3], tonumber(ARGV[1]), tonumber(ARGV[2]),
             tonumber(ARGV[3]))
"""
)

# A send's claim and, only when it was taken whole, the first allocation of its chat:
# n pts and box ids on the sender's side (guarded by the sender's no-blocks mark when
# the chat is with someone else) and on the recipient's (always guarded), without
# floors. What a send that is refused or a retry would take, it does not: nothing is
# allocated unless the claim was taken whole. The keys of both users are touched, so
# this runs on one Redis server only (on a cluster they are in different slots).
# KEYS: the log, the claim, the claims-since mark; then pts key, box id key, guard key,
# blocks-changed key of the sender, and of the recipient if any. ARGV: limit, window
# ms, claim ttl ms, n, the mark's ttl, sender guarded (1/0). Returns the claim's {wait,
# claimed, whole}, followed when it was taken whole by {missing mask, last pts, last box
# id} of each side, as allocate's, or {-1, the error, 0} for a side whose allocation
# failed: a side allocated before it is returned all the same, so that its caller can
# make a noop of what it took, and a side after it is not tried (its user would only
# get a noop).
CLAIM_AND_ALLOCATE_LUA = (
    _CLAIM_FUNCTION
    + _ALLOCATE_FUNCTION
    + """
local taken = claim(KEYS[1], KEYS[2], KEYS[3], tonumber(ARGV[1]), tonumber(ARGV[2]),
                    tonumber(ARGV[3]))
if taken[1] > 0 or taken[2] == 0 or taken[3] == 0 then
  return taken
end
local n = tonumber(ARGV[4])
local mark_ttl = tonumber(ARGV[5])
local guard = ARGV[6]
local failed = false
for side = 4, #KEYS, 4 do
  local ok, made = true, {-1, 'not tried: the allocation before it failed', 0}
  if not failed then
    ok, made = pcall(allocate, KEYS[side], KEYS[side + 1], KEYS[side + 2],
                     KEYS[side + 3], n, n, -1, -1, guard, '0', mark_ttl)
  end
  if not ok then
    -- Redis 7 raises a table with the error's text in 'err', older ones the text.
    if type(made) == 'table' then
      made = made['err']
    end
    made = {-1, tostring(made), 0}
    failed = true
  end
  taken[#taken + 1] = made[1]
  taken[#taken + 1] = made[2]
  taken[#taken + 1] = made[3]
  guard = '1'
end
return taken
"""
)

# Distinct phone numbers one user looked up (contacts.importContacts,
# contacts.resolvePhone) in a day, against enumeration. KEYS: the set (tokens, not
# numbers). ARGV: cap, ttl seconds, tokens... A token already in the set is free; a new
# one is added while the set holds fewer than `cap`. The day starts at the first lookup
# (the key's expiry is set then). Returns {seconds until the set expires, 1/0 per token
# (counted or refused)}.
PHONE_LOOKUPS_LUA = """
local cap = tonumber(ARGV[1])
local ttl = tonumber(ARGV[2])
local size = redis.call('SCARD', KEYS[1])
local out = {0}
for i = 3, #ARGV do
  if redis.call('SISMEMBER', KEYS[1], ARGV[i]) == 1 then
    out[#out + 1] = 1
  elseif size < cap then
    redis.call('SADD', KEYS[1], ARGV[i])
    size = size + 1
    out[#out + 1] = 1
  else
    out[#out + 1] = 0
  end
end
local left = redis.call('TTL', KEYS[1])
if left < 0 and size > 0 then
  redis.call('EXPIRE', KEYS[1], ttl)
  left = ttl
end
out[1] = left
return out
"""
