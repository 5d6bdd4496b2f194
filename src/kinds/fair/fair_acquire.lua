-- Take one hold of a fair lock (Redisson's RFairLock layout): first come, first served.
-- KEYS[1]  lock key: a hash of "<client-uuid>:<thread-id>" -> hold count
-- KEYS[2]  queue: a list of the waiting owner fields, first come first
-- KEYS[3]  places: Redisson's sorted set of the waiting owner fields by when each loses
--             its place (milliseconds since the epoch)
-- KEYS[4]  our waiters: a sorted set of this crate's waiting owner fields by when each
--             loses its place unless it comes back (milliseconds, this server's clock);
--             it lasts until the latest place of ours in KEYS[3] has passed (see below)
-- ARGV[1]  lease in milliseconds
-- ARGV[2]  owner field "<client-uuid>:<thread-id>"
-- ARGV[3]  holds the owner believes it has already (0 for a first hold)
-- ARGV[4]  how long a waiter keeps its place without coming back, in milliseconds
-- ARGV[5]  the least wait, in milliseconds, that a Redisson waiter ahead is taken to
--             subtract from the places behind it (Redisson's default fairLockWaitTimeout)
-- ARGV[6]  the lock's channel: a waiter's channel is this, ":", its owner field
-- Reply    nil when the hold was taken: the field now counts ARGV[3] + 1;
--          -3 when it was taken although the owner believed it held some already (they
--             expired or were deleted): the field counts ARGV[3] + 1 too;
--          otherwise {pttl, until}: the lock key's PTTL in milliseconds (-1 without expiry,
--             -2 when the lock is free but others are ahead in the queue): busy, and the
--             owner is queued at the end, or, queued already, keeps its place for ARGV[4]
--             more: until `until`, its new time in KEYS[4], which a release that grants it
--             the lock names in its message (see fair_release.lua), so that the owner
--             can tell a grant made after this attempt from one made before it;
--          the error "WRONGKIND <type>" when the key holds another type ("rwlock" for a
--             read-write lock's hash, "election" for an election's); nothing written;
--          an error, with nothing written, when the user may not write the keys or
--             publish to the waiter it would wake (below).
-- Waiters at the head of the queue whose place has run out (crashed, gone) are dropped
-- first: one of ours once its time in KEYS[4] has passed, any other once its place in
-- KEYS[3] has. When that leaves another waiter at the head of a free lock, it is woken
-- with "0" on its channel, as a release wakes it: nobody else would tell it, and a
-- Redisson waiter sleeps until the place of the waiter before it when it queued, which
-- the reserve below can put minutes later than this, or for the lock's lease at its last
-- attempt. A waiter of ours is found in KEYS[4] for as long as its place in KEYS[3]
-- lasts, whatever reserve that place keeps for Java waiters ahead: each attempt makes
-- KEYS[4] last until the place it set in KEYS[3] has passed, and only a Java waiter's
-- acquisition or give-up changes that place afterwards, always to an earlier one. So a
-- waiter missing from KEYS[4] is a Java waiter (or one of ours whose place has passed
-- anyway), and a waiter of ours that stops coming back is dropped ARGV[4] after its last
-- attempt, not when its place in KEYS[3] runs out, which the reserve for Java waiters
-- ahead of it may put tens of seconds or minutes later. A free lock goes to the head of
-- the queue only, or to anyone when it is empty. The field is set, not incremented, so
-- running this twice (a retry after a lost reply) still leaves ARGV[3] + 1 holds.
-- Places in KEYS[3]. A Redisson client takes its wait off every place when it acquires,
-- and off the places behind it when it gives up; its clients drop a head whose place has
-- passed. So a waiter of ours is placed at now + ARGV[4] plus a reserve for what the
-- Redisson waiters ahead may still take off: for each, the gap between its place and the
-- place of the Redisson waiter before it (for the first: now), at least ARGV[5]. When its
-- place moves later, the Redisson waiters right behind it move as much, so that each
-- keeps its wait after it. Our acquisitions and give-ups take nothing off anyone's place.
-- Cost. The reserve is worked out when a waiter joins, walking back from the tail to the
-- nearest waiter of ours, whose own reserve covers the Redisson waiters ahead of it; each
-- later attempt keeps what is left of it. Dropping a dead head happens once per waiter.
-- So an attempt reads a few entries whatever the queue's length, besides the run of
-- Redisson waiters at the tail or right behind it, and LPOS (a scan inside Redis) finding
-- its place to move them.
local had = 0
local exists = redis.call('exists', KEYS[1]) == 1
if exists then
    local readable
    readable, had = pcall(redis.call, 'hget', KEYS[1], ARGV[2])
    if not readable then
        local kind = redis.call('type', KEYS[1]).ok
        if kind ~= 'string' then
            return redis.error_reply('WRONGKIND ' .. kind)
        end
        had = false
    elseif redis.call('hexists', KEYS[1], 'mode') == 1 then
        return redis.error_reply('WRONGKIND rwlock')
    elseif not had and redis.call('hexists', KEYS[1], 'epoch') == 1 then
        return redis.error_reply('WRONGKIND election')
    end
    had = tonumber(had) or false
end
local check = redis.acl_check_cmd
if check then
    if not check('pexpire', KEYS[1], ARGV[1]) then
        return redis.error_reply('NOPERM this user may not run PEXPIRE on the lock key')
    end
    if not check('rpush', KEYS[2], ARGV[2]) or not check('lpop', KEYS[2])
        or not check('zadd', KEYS[3], '0', ARGV[2]) or not check('zrem', KEYS[3], ARGV[2])
        or not check('zadd', KEYS[4], '0', ARGV[2]) or not check('zrem', KEYS[4], ARGV[2])
        or not check('pexpire', KEYS[4], ARGV[4]) then
        return redis.error_reply('NOPERM this user may not write the fair lock queue')
    end
end
local now = redis.call('time')
now = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
local function gone(waiter)
    local until_ = tonumber(redis.call('zscore', KEYS[4], waiter))
    if not until_ then
        until_ = tonumber(redis.call('zscore', KEYS[3], waiter))
    end
    return not until_ or until_ <= now
end
local dropped, first = 0, nil
while true do
    first = redis.call('lindex', KEYS[2], dropped)
    if not first or not gone(first) then
        break
    end
    dropped = dropped + 1
end
local wake = dropped > 0 and not exists and first and first ~= ARGV[2]
    and (ARGV[6] .. ':' .. first)
if wake and check and not check('publish', wake, '0') then
    return redis.error_reply('NOPERM this user may not PUBLISH to the next waiter')
end
for _ = 1, dropped do
    local waiter = redis.call('lpop', KEYS[2])
    redis.call('zrem', KEYS[3], waiter)
    redis.call('zrem', KEYS[4], waiter)
end
if wake then
    redis.call('publish', wake, '0')
end
-- A Redisson client drops a head of ours from the queue and KEYS[3] only, once its place
-- there has passed: it is forgotten here once its time in KEYS[4] has passed too.
for _, waiter in ipairs(redis.call('zrangebyscore', KEYS[4], '-inf', now, 'limit', 0, 100)) do
    if not redis.call('zscore', KEYS[3], waiter) then
        redis.call('zrem', KEYS[4], waiter)
    end
end
local expected = tonumber(ARGV[3])
local mine = had and had > 0
if not exists then
    local head = redis.call('lindex', KEYS[2], 0)
    mine = not head or head == ARGV[2]
    if mine then
        if head then
            redis.call('lpop', KEYS[2])
        end
        redis.call('zrem', KEYS[3], ARGV[2])
        redis.call('zrem', KEYS[4], ARGV[2])
    end
end
if mine then
    local reply = nil
    if had ~= expected and had ~= expected + 1 then
        reply = -3
    end
    redis.call('hset', KEYS[1], ARGV[2], expected + 1)
    redis.call('pexpire', KEYS[1], ARGV[1])
    return reply
end
local wait, least = tonumber(ARGV[4]), tonumber(ARGV[5])
local was = tonumber(redis.call('zscore', KEYS[3], ARGV[2]))
local until_ = tonumber(redis.call('zscore', KEYS[4], ARGV[2]))
-- The reserve of a waiter ahead of ours: what its place keeps beyond its own time.
local function kept(waiter)
    local theirs = tonumber(redis.call('zscore', KEYS[3], waiter))
    local own = tonumber(redis.call('zscore', KEYS[4], waiter))
    return theirs and own and math.max(theirs - own, 0)
end
-- Where this waiter is in the queue (from 0), or false: LPOS scans it without copying
-- it; a user granted the older list of rights (without +lpos) reads the list instead.
local function position()
    local ok, at = pcall(redis.call, 'lpos', KEYS[2], ARGV[2])
    if ok then
        return at
    end
    for i, waiter in ipairs(redis.call('lrange', KEYS[2], 0, -1)) do
        if waiter == ARGV[2] then
            return i - 1
        end
    end
    return false
end
local reserve
if was and until_ then
    -- Queued already: the reserve its last attempt set, less what Redisson waiters ahead
    -- have taken off its place since (those that left without taking anything off leave
    -- their share in it).
    reserve = math.max(was - until_, 0)
else
    -- Joining at the tail, or queued by an attempt whose record here is gone: the
    -- Redisson waiters ahead, walked back from the tail (or from this waiter) to the
    -- nearest waiter of ours, whose own reserve covers those ahead of it. So the walk is as
    -- long as the run of Redisson waiters at the tail, not as long as the queue.
    local from = -1
    if was then
        from = position()
        from = from and from - 1
    end
    reserve = 0
    local after = nil
    while from do
        local waiter = (not was or from >= 0) and redis.call('lindex', KEYS[2], from)
        local base = waiter and kept(waiter)
        local place = waiter and not base and tonumber(redis.call('zscore', KEYS[3], waiter))
        if not waiter or base then
            -- The head of the queue, or a waiter of ours: the first Redisson waiter after
            -- it reserves the gap from it (from now at the head).
            local before = now
            if base then
                before = tonumber(redis.call('zscore', KEYS[3], waiter))
                reserve = reserve + base
            end
            if after then
                reserve = reserve + math.max(after - before, least)
            end
            break
        end
        if place then
            if after then
                reserve = reserve + math.max(after - place, least)
            end
            after = place
        end
        from = from - 1
    end
end
local place = now + wait + reserve
if redis.call('zadd', KEYS[3], place, ARGV[2]) == 1 then
    redis.call('rpush', KEYS[2], ARGV[2])
elseif was and place > was then
    -- A Redisson waiter's place is the place of the waiter before it plus its wait: the
    -- Redisson waiters behind this one, up to the next waiter of ours, move with it.
    local at = position()
    while at do
        at = at + 1
        local waiter = redis.call('lindex', KEYS[2], at)
        if not waiter or redis.call('zscore', KEYS[4], waiter) then
            break
        end
        local theirs = tonumber(redis.call('zscore', KEYS[3], waiter))
        if theirs then
            redis.call('zadd', KEYS[3], theirs + place - was, waiter)
        end
    end
end
redis.call('zadd', KEYS[4], now + wait, ARGV[2])
local lasts = math.ceil(wait + reserve)
if redis.call('pttl', KEYS[4]) < lasts then
    redis.call('pexpire', KEYS[4], lasts)
end
return {redis.call('pttl', KEYS[1]), now + wait}
