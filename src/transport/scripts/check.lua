-- Which of the commands the locks need this Redis user may not run (checked when a client
-- is built; Redis 7 and later can tell, older servers reply with an empty list).
-- KEYS[1]  a lock key under the client's key prefix
-- ARGV[1]  its unlock channel
-- ARGV[2]  an unlock latch key of it: only a name to check rights on, never read or written
-- Reply    an array of what is denied, as "COMMAND target"; empty when everything is allowed.
local check = redis.acl_check_cmd
if not check then
    return {}
end
local denied = {}
local function need(label, ...)
    if not check(...) then
        table.insert(denied, label)
    end
end
for _, command in ipairs({'exists', 'pttl', 'del'}) do
    need(string.upper(command) .. ' on ' .. KEYS[1], command, KEYS[1])
end
need('TYPE on ' .. KEYS[1], 'type', KEYS[1])
need('GET on ' .. KEYS[1], 'get', KEYS[1])
need('SET on ' .. KEYS[1], 'set', KEYS[1], 't', 'nx', 'px', '1')
need('HGET on ' .. KEYS[1], 'hget', KEYS[1], 'f')
need('HEXISTS on ' .. KEYS[1], 'hexists', KEYS[1], 'f')
need('HSET on ' .. KEYS[1], 'hset', KEYS[1], 'f', '1')
need('PEXPIRE on ' .. KEYS[1], 'pexpire', KEYS[1], '1')
need('EXISTS on ' .. ARGV[2], 'exists', ARGV[2])
need('GET on ' .. ARGV[2], 'get', ARGV[2])
need('SET on ' .. ARGV[2], 'set', ARGV[2], '1', 'px', '1')
need('PEXPIRE on ' .. ARGV[2], 'pexpire', ARGV[2], '1')
need('RENAME of ' .. KEYS[1] .. ' to ' .. ARGV[2], 'rename', KEYS[1], ARGV[2])
need('PUBLISH on ' .. ARGV[1], 'publish', ARGV[1], '0')
need('SUBSCRIBE on ' .. ARGV[1], 'subscribe', ARGV[1])
need('UNSUBSCRIBE on ' .. ARGV[1], 'unsubscribe', ARGV[1])
need('SCRIPT LOAD', 'script', 'load', 'return 1')
return denied
