-- What a lock looks like, judged by the scripts that show or delete a key whoever holds it
-- (inspect.lua, force_unlock.lua, fair_force_unlock.lua): placed before their own text,
-- so that one judgement decides what the operations tool lists and what it may delete.
-- It reads a bounded part of the key: its size first, then at most `limit` fields (or 64
-- bytes), never a large key whole.
--
-- A key is a lock when its whole shape says so:
--   a hash of exactly one owner field "<UUID>:<thread>" (a full UUID, as Redisson and this
--      crate write it, and a decimal thread id) with a hold count from 1 to 1,000,000: a
--      reentrant, fenced or fair lock;
--   a hash with "mode" = "read" and one or more such owners, none of them a writer, or
--      "mode" = "write" with one writer field "<owner>:write" and no other owner's reads: a
--      read-write lock;
--   a hash of "token" (32 hex digits), "epoch" (a positive number) and "name", and at most
--      "candidate", "since" (a number) and "value" beside them: an election;
--   a string of decimal digits with a permit set of 16-byte ids beside it: a leased
--      semaphore;
--   and a fair lock's queue is a list of owner fields only.
-- Where the shape could still be application data, the key is only a possible lock (a
-- doubt is given): a hash of a lock's shape without an expiry (every writer of that layout
-- sets one), and any string holding a token's shape (32 hex digits, or 24 base64
-- characters), which an MD5 digest, an ObjectId or an API key also have.

local function count_of(value)
    return value ~= nil and #value <= 7 and string.match(value, '^%d+$') ~= nil
        and tonumber(value) >= 1 and tonumber(value) <= 1000000
end

local UUID = '^' .. string.rep('%x', 8) .. '%-' .. string.rep('%x', 4) .. '%-'
    .. string.rep('%x', 4) .. '%-' .. string.rep('%x', 4) .. '%-' .. string.rep('%x', 12)
    .. ':%d+$'

local function is_owner(field)
    return #field >= 38 and #field <= 57 and string.match(field, UUID) ~= nil
end

local function is_token(value)
    if #value == 32 then
        return string.match(value, '^%x+$') ~= nil
    end
    if #value == 24 then
        local body = string.gsub(value, '==$', '')
        return string.match(body, '^[%w%+/]+$') ~= nil
    end
    return false
end

-- Whether `holder`, named by a caller, can hold a lock's hash: an owner field, or a
-- writer's "<owner>:write" (never "mode", which every read-write lock has).
local function is_holder(holder)
    return is_owner(holder) or is_owner(string.gsub(holder, ':write$', ''))
end

-- The hash's fields, at most `limit` of them (the first page of HSCAN beyond that), flat,
-- and how many it has.
local function hash_sample(key, limit)
    local size = redis.call('hlen', key)
    if size <= limit then
        return redis.call('hgetall', key), size
    end
    local page = redis.call('hscan', key, '0', 'COUNT', limit)[2]
    local fields = {}
    for i = 1, math.min(#page, 2 * limit) do
        fields[i] = page[i]
    end
    return fields, size
end

-- What the hash `fields` (flat) is: "hash", "rwlock" or "election", or nil and why not.
-- `mode` is the hash's mode field, read apart: a sample may not hold it.
local function hash_kind(fields, mode, size)
    local named = {}
    for i = 1, #fields, 2 do
        named[fields[i]] = fields[i + 1]
    end
    if named.token or named.epoch or named.name then
        local token = named.token or ''
        local epoch = named.epoch or ''
        local extra = 0
        for field, value in pairs(named) do
            if field == 'candidate' or field == 'value'
                or (field == 'since' and string.match(value, '^%d+$')) then
                extra = extra + 1
            end
        end
        if size == 3 + extra and #token == 32 and string.match(token, '^%x+$') and #epoch <= 20
            and string.match(epoch, '^[1-9]%d*$') and named.name then
            return 'election'
        end
        return nil, 'a hash with an election\'s fields, not in its shape'
    end
    local readers, writer = 0, nil
    for i = 1, #fields, 2 do
        local field, value = fields[i], fields[i + 1]
        if field ~= 'mode' then
            local owner = string.match(field, '^(.*):write$')
            if owner and is_owner(owner) then
                writer = owner
            elseif is_owner(field) then
                readers = readers + 1
            else
                return nil, 'a hash whose field ' .. string.format('%q', string.sub(field, 1, 40))
                    .. ' is no lock owner'
            end
            if not count_of(value) then
                return nil, 'a hash whose field ' .. string.format('%q', string.sub(field, 1, 40))
                    .. ' holds no hold count'
            end
        end
    end
    if not mode then
        if writer or size ~= 1 then
            return nil, 'a hash of ' .. size .. ' owner fields without a mode: a lock has one'
        end
        return 'hash'
    end
    if mode == 'read' and not writer and readers > 0 then
        return 'rwlock'
    end
    if mode == 'write' and writer then
        for i = 1, #fields, 2 do
            local field = fields[i]
            if field ~= 'mode' and field ~= writer .. ':write' and field ~= writer then
                return nil, 'a hash written by one owner and read by another'
            end
        end
        return 'rwlock'
    end
    return nil, 'a hash whose mode and owners are no read-write lock\'s'
end

-- Whether the list `queue` holds a fair lock's waiters: owner fields only (its first
-- `limit` looked at).
local function is_queue(queue, limit)
    if redis.call('type', queue).ok ~= 'list' then
        return false
    end
    for _, waiter in ipairs(redis.call('lrange', queue, 0, limit - 1)) do
        if not is_owner(waiter) then
            return false
        end
    end
    return true
end

-- What `key` is: its Redis type; the lock's kind ("hash", "rwlock", "election", "token",
-- "semaphore") or "" when it is none; why it is none, or why it may be data after all
-- ("" when it is a lock beyond doubt); its fields (a sample, flat) or its string (when 64
-- bytes long at most, else ""); and its size (fields, or bytes).
-- `permits` is the semaphore's permit set beside it; nil where no semaphore is wanted.
local function judge(key, permits, limit)
    local kind = redis.call('type', key).ok
    if kind == 'hash' then
        local fields, size = hash_sample(key, limit)
        local mode = redis.call('hget', key, 'mode')
        local shaped, why = hash_kind(fields, mode, size)
        if not shaped then
            return kind, '', why, fields, size
        end
        if redis.call('pttl', key) < 0 then
            return kind, shaped, 'a lock\'s shape without the expiry every lock has', fields, size
        end
        return kind, shaped, '', fields, size
    end
    if kind == 'string' then
        local size = redis.call('strlen', key)
        local value = ''
        if size <= 64 then
            value = redis.call('get', key)
        end
        if size <= 20 and string.match(value, '^%d+$') then
            local first = permits and redis.call('type', permits).ok == 'zset'
                and redis.call('zrange', permits, 0, 0)[1]
            if first and #first == 16 then
                return kind, 'semaphore', '', value, size
            end
            if not permits then
                return kind, '', 'a number: a semaphore\'s permits, or a counter', value, size
            end
            return kind, '', 'a number with no held permits beside it: a counter, or a '
                .. 'semaphore of which no permit is held', value, size
        end
        if size <= 32 and is_token(value) then
            if redis.call('pttl', key) < 0 then
                return kind, 'token', 'a token\'s shape without an expiry', value, size
            end
            return kind, 'token', 'a token\'s shape, which a digest or an id has too', value,
                size
        end
        return kind, '', 'a string that is no lock token', value, size
    end
    if kind == 'none' then
        return kind, '', '', {}, 0
    end
    return kind, '', 'a ' .. kind, {}, 0
end
-- The script itself follows.
