-- Read who leads an election, who led it lately and who waits to lead, writing nothing.
-- KEYS[1]  the election's key
-- KEYS[2]  the epoch counter "redisson_lock_token:{<key>}"
-- KEYS[3]  the record of recent leaders "redisson_lock_token:{<key>}:redmutex_leaders"
-- KEYS[4]  the waiting candidates "redisson_lock_token:{<key>}:redmutex_candidates"
-- KEYS[5]  the queue of a first-come-first-served election's candidates: the fair queue of
--          its queue lock, "redisson_lock_queue:{<key>}:redmutex_queue"
-- KEYS[6]  the times until which this crate's queued candidates keep their places:
--          "redisson_lock_timeout:{<key>}:redmutex_queue:redmutex_alive"
-- ARGV[1]  the last epoch the reader knows of (0: none): the record's entries after it are
--          returned
-- ARGV[2]  "1" to have the waiting candidates returned, "0" not to
-- Reply    {{epoch, name, pttl, counter, record}, {value, candidate, since, waiting, queued}}:
--            epoch     the leader's epoch, 0 when nobody leads (no key, or a token: a
--                      SET-NX lock of another library; see shape.lua, which comes before
--                      this text);
--            name      the leader's name, "" when nobody leads;
--            pttl      the leader's lease left in milliseconds (-1: no expiry, -2: no key);
--            counter   the last epoch handed out, 0 when none was;
--            record    the recorded leaders after ARGV[1], oldest first, flat: epoch, name;
--            value     the leader's value, nil when it has none;
--            candidate the leader's candidate id, "" when nobody leads or it has none;
--            since     when the leader was elected (server time, milliseconds), 0 unknown;
--            waiting   with ARGV[2], the candidates still listed, flat: id, since, name;
--            queued    with ARGV[2], the queued candidates (of the first 64 in the queue)
--                      that keep their places, in their order, flat as `waiting`;
--          the error "WRONGKIND <type>" when the key holds another kind of data (a string
--          that is no token among them).
local kind = redis.call('type', KEYS[1]).ok
local epoch, name, value, candidate, since = 0, '', false, '', 0
if kind == 'hash' then
    local _, shaped = judge(KEYS[1], nil, 8)
    if shaped ~= 'election' then
        return redis.error_reply('WRONGKIND ' .. (shaped == 'rwlock' and 'rwlock' or 'hash'))
    end
    local held = redis.call('hmget', KEYS[1], 'epoch', 'name', 'value', 'candidate', 'since')
    epoch, name, value = tonumber(held[1]), held[2] or '', held[3]
    candidate, since = held[4] or '', tonumber(held[5]) or 0
elseif kind == 'string' then
    -- Nobody leads while a SET-NX lock of another library holds the key; any other string
    -- is another kind's data (see election_acquire.lua).
    local _, shaped = judge(KEYS[1], nil, 1)
    if shaped ~= 'token' then
        return redis.error_reply('WRONGKIND string')
    end
elseif kind ~= 'none' then
    return redis.error_reply('WRONGKIND ' .. kind)
end
local counter = 0
if redis.call('type', KEYS[2]).ok == 'string' then
    counter = tonumber(redis.call('get', KEYS[2])) or 0
end
local record = {}
local after = tonumber(ARGV[1])
if redis.call('type', KEYS[3]).ok == 'list' then
    for _, entry in ipairs(redis.call('lrange', KEYS[3], 0, -1)) do
        local at = string.find(entry, ' ', 1, true)
        local led = at and tonumber(string.sub(entry, 1, at - 1))
        if led and led > after then
            record[#record + 1] = led
            record[#record + 1] = string.sub(entry, at + 1)
        end
    end
end
local waiting, queued = {}, {}
if ARGV[2] == '1' then
    local clock = redis.call('time')
    local now = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)
    local listed = redis.call('type', KEYS[4]).ok == 'hash'
    if listed then
        local entries = redis.call('hgetall', KEYS[4])
        for i = 1, #entries, 2 do
            local until_ms, began, who = string.match(entries[i + 1], '^(%d+) (%d+) (.*)$')
            if until_ms and tonumber(until_ms) >= now and entries[i] ~= candidate
                and string.sub(entries[i], 1, 7) ~= 'queued:' then
                waiting[#waiting + 1] = entries[i]
                waiting[#waiting + 1] = tonumber(began)
                waiting[#waiting + 1] = who
            end
        end
    end
    -- Queued candidates are as alive as their places in the queue: a listing of one
    -- whose place is gone (its process died) is not shown.
    -- Read only where the user may (a user of plain elections may have no rights there).
    local function type_of(key)
        local readable, kind = pcall(redis.call, 'type', key)
        return readable and kind.ok or 'none'
    end
    if type_of(KEYS[5]) == 'list' and type_of(KEYS[6]) == 'zset' then
        for _, owner in ipairs(redis.call('lrange', KEYS[5], 0, 63)) do
            local place = tonumber(redis.call('zscore', KEYS[6], owner))
            if place and place >= now then
                local entry = listed and redis.call('hget', KEYS[4], 'queued:' .. owner)
                local began, size, rest
                if entry then
                    began, size, rest = string.match(entry, '^%d+ (%d+) (%d+) (.*)$')
                end
                if rest then
                    queued[#queued + 1] = string.sub(rest, 1, tonumber(size))
                    queued[#queued + 1] = tonumber(began)
                    queued[#queued + 1] = string.sub(rest, tonumber(size) + 1)
                else
                    queued[#queued + 1] = owner
                    queued[#queued + 1] = 0
                    queued[#queued + 1] = ''
                end
            end
        end
    end
end
return {{epoch, name, redis.call('pttl', KEYS[1]), counter, record},
    {value, candidate, since, waiting, queued}}
