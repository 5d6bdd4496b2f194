-- Read who leads an election, who led it lately and who waits to lead, writing nothing.
-- KEYS[1]  the election's key
-- KEYS[2]  the epoch counter "redisson_lock_token:{<key>}"
-- KEYS[3]  the record of recent leaders "redisson_lock_token:{<key>}:redmutex_leaders"
-- KEYS[4]  the waiting candidates "redisson_lock_token:{<key>}:redmutex_candidates"
-- ARGV[1]  the last epoch the reader knows of (0: none): the record's entries after it are
--          returned
-- ARGV[2]  "1" to have the waiting candidates returned, "0" not to
-- Reply    {{epoch, name, pttl, counter, record}, {value, candidate, since, waiting}}:
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
local waiting = {}
if ARGV[2] == '1' and redis.call('type', KEYS[4]).ok == 'hash' then
    local clock = redis.call('time')
    local now = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)
    local entries = redis.call('hgetall', KEYS[4])
    for i = 1, #entries, 2 do
        local until_ms, began, who = string.match(entries[i + 1], '^(%d+) (%d+) (.*)$')
        if until_ms and tonumber(until_ms) >= now and entries[i] ~= candidate then
            waiting[#waiting + 1] = entries[i]
            waiting[#waiting + 1] = tonumber(began)
            waiting[#waiting + 1] = who
        end
    end
end
return {{epoch, name, redis.call('pttl', KEYS[1]), counter, record},
    {value, candidate, since, waiting}}
