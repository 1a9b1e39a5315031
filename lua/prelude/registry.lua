-- The tables each algorithm file registers its functions into, by name, and `decide` calls
-- them through: the one place an algorithm joins the scripts.

-- algorithm name -> function(key, limit, window, cost, now, apply)
--   returns allowed (1|0), remaining, reset_ms (until full again), retry_ms (0 if allowed, -1 never)
--   and writes the new state only when apply is true and the request is allowed.
local ALGORITHMS = {}

-- algorithm name -> function(key, limit, window, amount, now, at)
--   takes `amount` more (a penalty) whatever is left, or with a negative amount and `at`, the
--   time a consume was charged at, gives that much back (a refund): never past a full limit,
--   and never into a window other than the one charged.
local ADJUSTMENTS = {}

-- algorithm name -> true for one whose state is not one string written by save_state (the
-- sliding-window log's sorted set, written by its own commands): its writes cannot be held
-- back (see `decide`).
local WRITES_ITSELF = {}

-- algorithm name -> function(key, limit, window, cost, now, at) for one that holds leases
-- (concurrency): moves the `cost` slots taken at `at` to a lease that starts `now`; returns 1,
-- or 0 when they are no longer held. Such an algorithm's ADJUSTMENTS are its release, and
-- return how many slots they found; it takes no refund or penalty, and only it is touched by a
-- release (see `decide`).
local LEASES = {}

-- algorithm name -> function(key, limit, window, unused, now, at, ends, id) for a rate algorithm:
-- ends the quota lease `id` taken at `at` and ending at `ends` (scripts' ms), giving back its
-- `unused` units. A lease past its end gives nothing back: its holder has stopped using it, and
-- its units count as used (see lua/prelude/quota.lua and docs/leases.md).
local QUOTA_RETURNS = {}

-- The quota lease a consume is taking, while `take_quota_lease` decides it: { id, units, ends }
-- with `ends` in scripts' ms, which an algorithm that ends leases sooner (a window's end) lowers.
-- nil otherwise.
local QUOTA
