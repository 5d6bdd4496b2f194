//! A Java owner using Redisson (3.52), played from a raw connection: the steps of its
//! scripts as `docs/layouts.md` lists them (§1, §4, §5, §6, §10), written here as Lua
//! of our own. The unlock latch (§2) is left out: these calls are never retried. The
//! model-based tests (`model::*`) and the cross-client tests (`redisson_family`) both run
//! these, so each Redisson step is written once; `java_differential` checks them step by
//! step against real Redisson.

/// The Java owner's id: `<client uuid>:<thread id>`.
pub const JAVA: &str = "0b6f2c1e-7a44-4d2b-9c3e-5f1a2b3c4d5e:77";

/// Runs `script` as Redisson sends it: EVAL with keys and arguments.
pub fn eval<T: redis::FromRedisValue>(
    conn: &mut redis::Connection,
    script: &str,
    keys: &[&str],
    args: &[Vec<u8>],
) -> T {
    let mut cmd = redis::cmd("EVAL");
    cmd.arg(script).arg(keys.len()).arg(keys).arg(args);
    cmd.query(conn).unwrap()
}

/// One argument, as Redisson sends numbers and strings: UTF-8 text.
pub fn arg(value: impl std::fmt::Display) -> Vec<u8> {
    value.to_string().into_bytes()
}

/// Epoch milliseconds now, as a Redisson client passes its clock.
pub fn epoch_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

/// §1 acquire. KEYS=[lock]; ARGV=[lease, owner]. nil: acquired; else PTTL.
pub const LOCK_ACQUIRE: &str = r#"
if redis.call('exists', KEYS[1]) == 0 or redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
  redis.call('hincrby', KEYS[1], ARGV[2], 1)
  redis.call('pexpire', KEYS[1], ARGV[1])
  return nil
end
return redis.call('pttl', KEYS[1])
"#;

/// §1 unlock, without the latch. KEYS=[lock, channel]; ARGV=[0, lease, owner].
pub const LOCK_UNLOCK: &str = r#"
if redis.call('hexists', KEYS[1], ARGV[3]) == 0 then return nil end
if redis.call('hincrby', KEYS[1], ARGV[3], -1) > 0 then
  redis.call('pexpire', KEYS[1], ARGV[2])
  return 0
end
redis.call('del', KEYS[1])
redis.call('publish', KEYS[2], ARGV[1])
return 1
"#;

/// §6 acquire with token. KEYS=[lock, token]; ARGV=[lease, owner]. [-1, token] or
/// [PTTL, -1].
pub const FENCED_ACQUIRE: &str = r#"
if redis.call('exists', KEYS[1]) == 0 or redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
  local token = redis.call('incr', KEYS[2])
  redis.call('hincrby', KEYS[1], ARGV[2], 1)
  redis.call('pexpire', KEYS[1], ARGV[1])
  return {-1, token}
end
return {redis.call('pttl', KEYS[1]), -1}
"#;

/// §4's purge step P, at the top of the fair scripts; `now` is ARGV[n]. A head without a
/// place stops the purge, as in Redisson.
const PURGE: &str = r#"
while true do
  local head = redis.call('lindex', KEYS[2], 0)
  if not head then break end
  local score = redis.call('zscore', KEYS[3], head)
  if score and tonumber(score) <= now then
    redis.call('zrem', KEYS[3], head); redis.call('lpop', KEYS[2])
  else break end
end
"#;

/// §4 acquire with waiting. KEYS=[lock, queue, zset]; ARGV=[lease, owner, wait, now].
pub fn fair_acquire() -> String {
    format!(
        "local now = tonumber(ARGV[4])\n{PURGE}{}",
        r#"
local head = redis.call('lindex', KEYS[2], 0)
if redis.call('exists', KEYS[1]) == 0 and (not head or head == ARGV[2]) then
  redis.call('lpop', KEYS[2]); redis.call('zrem', KEYS[3], ARGV[2])
  for _, m in ipairs(redis.call('zrange', KEYS[3], 0, -1)) do
    redis.call('zincrby', KEYS[3], -tonumber(ARGV[3]), m)
  end
  redis.call('hset', KEYS[1], ARGV[2], 1); redis.call('pexpire', KEYS[1], ARGV[1])
  return nil
end
if redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
  redis.call('hincrby', KEYS[1], ARGV[2], 1); redis.call('pexpire', KEYS[1], ARGV[1])
  return nil
end
if redis.call('zscore', KEYS[3], ARGV[2]) then
  return math.max(0, redis.call('pttl', KEYS[1]))
end
local tail = redis.call('lindex', KEYS[2], -1)
local ttl
if tail and tail ~= ARGV[2] and redis.call('zscore', KEYS[3], tail) then
  ttl = tonumber(redis.call('zscore', KEYS[3], tail)) - now
else
  ttl = redis.call('pttl', KEYS[1])
end
if redis.call('zadd', KEYS[3], ttl + tonumber(ARGV[3]) + now, ARGV[2]) == 1 then
  redis.call('rpush', KEYS[2], ARGV[2])
end
return ttl
"#
    )
}

/// §4 unlock, without the latch. KEYS=[lock, queue, zset, channel]; ARGV=[0, lease, owner,
/// now].
pub fn fair_unlock() -> String {
    format!(
        "local now = tonumber(ARGV[4])\n{PURGE}{}",
        r#"
local head = redis.call('lindex', KEYS[2], 0)
if redis.call('exists', KEYS[1]) == 0 then
  if head then redis.call('publish', KEYS[4] .. ':' .. head, ARGV[1]) end
  return 1
end
if redis.call('hexists', KEYS[1], ARGV[3]) == 0 then return nil end
if redis.call('hincrby', KEYS[1], ARGV[3], -1) > 0 then
  redis.call('pexpire', KEYS[1], ARGV[2]); return 0
end
redis.call('del', KEYS[1])
if head then redis.call('publish', KEYS[4] .. ':' .. head, ARGV[1]) end
return 1
"#
    )
}

/// §4 give up: those behind the leaving waiter get its wait back off their places.
/// KEYS=[queue, zset]; ARGV=[owner, wait]. Replies 1 if the owner was queued, else 0: a
/// reply of ours, which no test reads.
pub const FAIR_GIVE_UP: &str = r#"
local pos = nil
local queue = redis.call('lrange', KEYS[1], 0, -1)
for i, m in ipairs(queue) do
  if m == ARGV[1] then pos = i break end
end
if pos then
  for i = pos + 1, #queue do
    redis.call('zincrby', KEYS[2], -tonumber(ARGV[2]), queue[i])
  end
end
redis.call('zrem', KEYS[2], ARGV[1])
redis.call('lrem', KEYS[1], 0, ARGV[1])
return pos and 1 or 0
"#;

/// §5 read acquire. KEYS=[rw, timeoutPrefix]; ARGV=[lease, owner, owner:write].
pub const READ_ACQUIRE: &str = r#"
local mode = redis.call('hget', KEYS[1], 'mode')
if not mode then
  redis.call('hset', KEYS[1], 'mode', 'read')
  redis.call('hset', KEYS[1], ARGV[2], 1)
  redis.call('set', KEYS[2] .. ':1', 1, 'px', ARGV[1])
  redis.call('pexpire', KEYS[1], ARGV[1])
  return nil
end
if mode == 'read' or (mode == 'write' and redis.call('hexists', KEYS[1], ARGV[3]) == 1) then
  local i = redis.call('hincrby', KEYS[1], ARGV[2], 1)
  redis.call('set', KEYS[2] .. ':' .. i, 1, 'px', ARGV[1])
  redis.call('pexpire', KEYS[1], math.max(redis.call('pttl', KEYS[1]), tonumber(ARGV[1])))
  return nil
end
return redis.call('pttl', KEYS[1])
"#;

/// §5 read unlock, without the latch. KEYS=[rw, channel, timeoutPrefix, keyPrefix];
/// ARGV=[0, owner].
pub const READ_UNLOCK: &str = r#"
local mode = redis.call('hget', KEYS[1], 'mode')
if not mode then redis.call('publish', KEYS[2], ARGV[1]); return nil end
if redis.call('hexists', KEYS[1], ARGV[2]) == 0 then return nil end
local count = redis.call('hincrby', KEYS[1], ARGV[2], -1)
if count == 0 then redis.call('hdel', KEYS[1], ARGV[2]) end
redis.call('del', KEYS[3] .. ':' .. (count + 1))
if redis.call('hlen', KEYS[1]) > 1 then
  local longest = -3
  for _, field in ipairs(redis.call('hkeys', KEYS[1])) do
    if field ~= 'mode' then
      local n = tonumber(redis.call('hget', KEYS[1], field))
      if n then
        for i = n, 1, -1 do
          local t = redis.call('pttl', KEYS[4] .. ':' .. field .. ':rwlock_timeout:' .. i)
          longest = math.max(longest, t)
        end
      end
    end
  end
  if longest > 0 then
    redis.call('pexpire', KEYS[1], longest); return 0
  end
  if mode == 'write' then return 0 end
end
redis.call('del', KEYS[1])
redis.call('publish', KEYS[2], ARGV[1])
return 1
"#;

/// §5 write acquire. KEYS=[rw]; ARGV=[lease, owner:write].
pub const WRITE_ACQUIRE: &str = r#"
local mode = redis.call('hget', KEYS[1], 'mode')
if not mode then
  redis.call('hset', KEYS[1], 'mode', 'write')
  redis.call('hset', KEYS[1], ARGV[2], 1)
  redis.call('pexpire', KEYS[1], ARGV[1])
  return nil
end
if mode == 'write' and redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
  redis.call('hincrby', KEYS[1], ARGV[2], 1)
  redis.call('pexpire', KEYS[1], redis.call('pttl', KEYS[1]) + tonumber(ARGV[1]))
  return nil
end
return redis.call('pttl', KEYS[1])
"#;

/// §5 write unlock, without the latch. KEYS=[rw, channel]; ARGV=[1, lease, owner:write].
pub const WRITE_UNLOCK: &str = r#"
local mode = redis.call('hget', KEYS[1], 'mode')
if not mode then redis.call('publish', KEYS[2], ARGV[1]); return nil end
if mode == 'write' then
  if redis.call('hexists', KEYS[1], ARGV[3]) == 0 then return nil end
  if redis.call('hincrby', KEYS[1], ARGV[3], -1) > 0 then
    redis.call('pexpire', KEYS[1], ARGV[2]); return 0
  end
  redis.call('hdel', KEYS[1], ARGV[3])
  if redis.call('hlen', KEYS[1]) == 1 then
    redis.call('del', KEYS[1]); redis.call('publish', KEYS[2], ARGV[1])
  else
    redis.call('hset', KEYS[1], 'mode', 'read')
  end
  return 1
end
return nil
"#;

/// §10 tryAcquire, purge step first. KEYS=[name, zset, channel]; ARGV=[count, expiryAt,
/// now, 922337203685477, pub, ids…]: one id per permit.
pub const PERMIT_ACQUIRE: &str = r#"
local now = tonumber(ARGV[3])
local expired = redis.call('zrangebyscore', KEYS[2], 0, now, 'limit', 0, tonumber(ARGV[1]))
if #expired > 0 then
  redis.call('zrem', KEYS[2], unpack(expired))
  local value = redis.call('incrby', KEYS[1], #expired)
  if value > 0 then redis.call(ARGV[5], KEYS[3], value) end
end
local value = tonumber(redis.call('get', KEYS[1]))
if value ~= nil and value >= tonumber(ARGV[1]) then
  redis.call('decrby', KEYS[1], ARGV[1])
  for i = 6, #ARGV do redis.call('zadd', KEYS[2], ARGV[2], ARGV[i]) end
  local ttl = redis.call('pttl', KEYS[1])
  if ttl > 0 then redis.call('pexpire', KEYS[2], ttl) end
  return 'OK'
end
local first = redis.call('zrange', KEYS[2], 0, 0, 'withscores')
if first[2] ~= nil and tonumber(first[2]) ~= tonumber(ARGV[4]) then
  return ':' .. first[2]
end
return nil
"#;

/// §10 tryRelease(id). KEYS=[name, channel, zset]; ARGV=[id, 1, now, pub].
pub const PERMIT_RELEASE: &str = r#"
local score = redis.call('zscore', KEYS[3], ARGV[1])
if not score then return 0 end
redis.call('zrem', KEYS[3], ARGV[1])
local value = redis.call('incrby', KEYS[1], ARGV[2])
redis.call(ARGV[4], KEYS[2], value)
if tonumber(score) <= tonumber(ARGV[3]) then return 0 end
return 1
"#;
