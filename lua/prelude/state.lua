-- Every read and write of a state or box key, through one table per call: shared so that a
-- key is read from Redis once per call, and so that `decide` can hold a consume's writes back.

-- The states this call has read or written, by key (false: none), so that a key is read from
-- Redis once per call: by a decision that looks at it more than once (see `decide`), and by
-- each request of a batch that decides the same identity. Every GET, SET and DEL of a state or
-- box key goes through read_state, write_state and drop_state, so the table always holds what
-- Redis would answer; keys do not expire while a script runs.
--
-- GIVEN_NOW: the time the caller gives (for tests), ARGV[1] of both entry scripts, in Unix ms;
-- nil to run on Redis's clock, which its TTLs count on. A given clock need not keep pace with them.
--
-- HELD: true while a consume's writes wait for every policy to admit (see `decide`). They wait
-- in HELD_WRITES, its first HELD_N entries: one table for every decision, since a new table per
-- decision cost 5% of a two-policy decision, counted by callgrind. Entries past HELD_N are stale.
-- Each is (key, state, ms, kept) for write_state, or (key, function, a, b) for a write made with
-- commands of its own, which `decide` calls as function(key, a, b, now).
--
-- DIRTY: the keys this call has set, by key: the expiry in ms of the write to send, true to keep
-- the key's expiry (KEEPTTL), or false once deleted. Writes wait there until the call ends
-- (`flush_states`), so a batch that decides one identity many times, as one busy tenant's
-- batches do, sets its key once rather than once per request. DIRTY_KEYS lists them in the
-- order first set, its first DIRTY_N entries.
--
-- `begin` (lua/prelude/clock.lua) sets them all as each call begins, since Redis's function
-- library (see packages/core/scripts/generate-lua.mjs) runs this code once and then serves every
-- call, and a call that failed part-way must leave nothing to the next. It empties STATES and
-- DIRTY rather than making them anew: two new tables a call, each grown key by key and left for
-- the garbage collector, cost a call alone 1% of what Redis runs for it, counted by callgrind.
local STATES, DIRTY, DIRTY_N = {}, {}, 0
local GIVEN_NOW, HELD
local HELD_WRITES, HELD_N, DIRTY_KEYS = {}, 0, {}

-- What every expiry a script sets adds to the time its state is good for. Redis 7.2 and later
-- time PX and PEXPIRE from the script's start, which can read a millisecond before its TIME: a
-- key gone before its state's time would be read as fresh, and admit what the state refuses.
-- A key that outlives its time is read by the times it holds, which say it is spent.
local EXPIRY_MARGIN_MS = 1

local function read_state(key)
  local state = STATES[key]
  if state == nil then
    state = redis.call('GET', key)
    STATES[key] = state
  end
  return state
end

-- Sets a state that expires in `ms`, once the call ends. `kept` says the key exists and already
-- expires then, as when it counts in the window it is written in: it keeps its expiry, on
-- Redis's clock, since a SET that moves a key's expiry costs Redis about twice one that keeps it.
-- A kept write after one that set an expiry in this call keeps that expiry, as KEEPTTL would.
local function write_state(key, state, ms, kept)
  STATES[key] = state
  local dirty = DIRTY[key]
  if dirty == nil then
    DIRTY_N = DIRTY_N + 1
    DIRTY_KEYS[DIRTY_N] = key
  end
  if not kept or GIVEN_NOW ~= nil then
    DIRTY[key] = ms
  elseif not dirty then
    DIRTY[key] = true
  end
end

-- Sends the call's writes, each key's last. The expiry goes as a string: Redis 7.0 formats a
-- number argument with %.17g, which costs more than '%d' (1% of a one-policy decision in a
-- batch, counted by callgrind). The key lives a millisecond past its state (EXPIRY_MARGIN_MS).
local function flush_states()
  for i = 1, DIRTY_N do
    local key = DIRTY_KEYS[i]
    local ms = DIRTY[key]
    if ms == true then
      redis.call('SET', key, STATES[key], 'KEEPTTL')
    elseif ms then
      redis.call('SET', key, STATES[key], 'PX', string_format('%d', ms + EXPIRY_MARGIN_MS))
    end
  end
end

-- What an algorithm calls to write a consume: held back in HELD_WRITES while `decide` waits for
-- every policy to admit, written at once otherwise.
local function save_state(key, state, ms, kept)
  if HELD then
    local n = HELD_N
    HELD_WRITES[n + 1], HELD_WRITES[n + 2], HELD_WRITES[n + 3], HELD_WRITES[n + 4] =
      key, state, ms, kept or false
    HELD_N = n + 4
  else
    write_state(key, state, ms, kept)
  end
end

local function drop_state(key)
  redis.call('DEL', key)
  STATES[key] = false
  if DIRTY[key] ~= nil then DIRTY[key] = false end
end
