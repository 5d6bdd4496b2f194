// A Redisson client driven by the tests over stdin and stdout, one JSON object per line.
//
// Each request names an `id`, an `op`, and usually a `client` (made by `connect`) and a
// `thread`: the driver runs the request on a Java thread of that name (made on first use,
// one per name and client), so that Redisson sees the same owner, `<client uuid>:<thread
// id>`, for every request of one thread, and a blocked `lock` leaves the other threads free.
// Replies come in the order the requests finish: {"id": N, "ok": true, "value": ...} or
// {"id": N, "ok": false, "error": "..."}. The driver exits when stdin closes.
//
// Ops (other fields in brackets; durations in milliseconds; `lease` -1 or absent means
// Redisson's watchdog):
//   connect [url, watchdog]              -> client id; `uuid` and `version` beside it
//   shutdown [client]                    -> null; the client's threads are abandoned
//   owner [client, thread]               -> "<uuid>:<thread id>" of that thread
// For a lock, with `kind` one of lock, fenced, fair, read, write, spin, nonreentrant,
// nonreentrantFair (the last two Redisson 4.4+), or multi (with `names`) and `name`:
//   lock [lease]; tryLock [wait, lease] -> bool; unlock; forceUnlock -> bool;
//   holdCount -> int; ttl -> remainTimeToLive(); isLocked -> bool; heldByMe -> bool;
//   lockToken [lease], tryLockToken [wait, lease] -> token or null, token (fenced kinds)
// For kind permits (RPermitExpirableSemaphore) and semaphore (RSemaphore), with `name`:
//   trySetPermits [n] -> bool; addPermits [n]; available -> int;
//   acquire [lease | n] -> permit id | null; tryAcquire [wait, lease | n] -> permit id |
//   null | bool; release [permit | n]
// For kind latch (RCountDownLatch): trySetCount [n] -> bool; countDown; await [wait] ->
//   bool; count -> long.

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.redisson.Redisson;
import org.redisson.api.RCountDownLatch;
import org.redisson.api.RFencedLock;
import org.redisson.api.RLock;
import org.redisson.api.RPermitExpirableSemaphore;
import org.redisson.api.RSemaphore;
import org.redisson.api.RedissonClient;
import org.redisson.config.Config;

public final class Driver {
    private static final ObjectMapper JSON = new ObjectMapper();
    private static final PrintStream OUT =
            new PrintStream(System.out, false, StandardCharsets.UTF_8);
    private static final Map<String, RedissonClient> CLIENTS = new ConcurrentHashMap<>();
    private static final Map<String, ExecutorService> THREADS = new ConcurrentHashMap<>();
    private static final AtomicInteger NEXT_CLIENT = new AtomicInteger();

    public static void main(String[] args) throws Exception {
        BufferedReader in =
                new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null) {
            JsonNode request;
            try {
                request = JSON.readTree(line);
            } catch (Exception e) {
                reply(-1, false, null, "unreadable request: " + line);
                continue;
            }
            long id = request.path("id").asLong(-1);
            String client = request.path("client").asText("");
            String thread = client + "/" + request.path("thread").asText("main");
            ExecutorService worker = THREADS.computeIfAbsent(thread, Driver::worker);
            worker.execute(() -> run(id, request));
        }
        // stdin closed: the test process is gone.
        Runtime.getRuntime().halt(0);
    }

    private static ExecutorService worker(String name) {
        return Executors.newSingleThreadExecutor(task -> {
            Thread thread = new Thread(task, name);
            thread.setDaemon(true);
            return thread;
        });
    }

    private static void run(long id, JsonNode request) {
        try {
            reply(id, true, op(request), null);
        } catch (Throwable e) {
            Throwable cause = e;
            while (cause.getCause() != null && cause.getMessage() == null) {
                cause = cause.getCause();
            }
            reply(id, false, null, cause.getClass().getSimpleName() + ": " + cause.getMessage());
        }
    }

    private static void reply(long id, boolean ok, Object value, String error) {
        ObjectNode reply = JSON.createObjectNode();
        reply.put("id", id);
        reply.put("ok", ok);
        if (ok) {
            reply.set("value", JSON.valueToTree(value));
        } else {
            reply.put("error", error);
        }
        synchronized (OUT) {
            OUT.println(reply);
            OUT.flush();
        }
    }

    private static Object op(JsonNode r) throws Exception {
        String op = r.path("op").asText();
        switch (op) {
            case "connect":
                return connect(r);
            case "shutdown": {
                RedissonClient client = CLIENTS.remove(r.path("client").asText());
                if (client != null) {
                    client.shutdown(0, 0, TimeUnit.MILLISECONDS);
                }
                return null;
            }
            case "owner":
                return id(client(r)) + ":" + Thread.currentThread().getId();
            default:
                break;
        }
        String kind = r.path("kind").asText();
        switch (kind) {
            case "permits":
                return permits(r, op, client(r).getPermitExpirableSemaphore(name(r)));
            case "semaphore":
                return semaphore(r, op, client(r).getSemaphore(name(r)));
            case "latch":
                return latch(r, op, client(r).getCountDownLatch(name(r)));
            default:
                return lock(r, op, lock(r, kind));
        }
    }

    private static Object connect(JsonNode r) {
        Config config = new Config();
        config.useSingleServer()
                .setAddress(r.path("url").asText())
                .setConnectionMinimumIdleSize(1)
                .setConnectionPoolSize(8)
                .setSubscriptionConnectionMinimumIdleSize(1)
                .setConnectTimeout(5000)
                .setTimeout(5000);
        if (r.has("watchdog")) {
            config.setLockWatchdogTimeout(r.path("watchdog").asLong());
        }
        RedissonClient client = Redisson.create(config);
        String handle = "c" + NEXT_CLIENT.incrementAndGet();
        CLIENTS.put(handle, client);
        ObjectNode value = JSON.createObjectNode();
        value.put("client", handle);
        value.put("uuid", id(client));
        value.put("version", Redisson.class.getPackage().getImplementationVersion());
        return value;
    }

    private static String id(RedissonClient client) {
        return ((Redisson) client).getServiceManager().getId();
    }

    private static RedissonClient client(JsonNode r) {
        RedissonClient client = CLIENTS.get(r.path("client").asText());
        if (client == null) {
            throw new IllegalArgumentException("no client " + r.path("client"));
        }
        return client;
    }

    private static String name(JsonNode r) {
        return r.path("name").asText();
    }

    private static RLock lock(JsonNode r, String kind) {
        RedissonClient client = client(r);
        switch (kind) {
            case "lock":
                return client.getLock(name(r));
            case "fenced":
                return client.getFencedLock(name(r));
            case "fair":
                return client.getFairLock(name(r));
            case "read":
                return client.getReadWriteLock(name(r)).readLock();
            case "write":
                return client.getReadWriteLock(name(r)).writeLock();
            case "spin":
                return client.getSpinLock(name(r));
            case "nonreentrant":
                return client.getNonReentrantLock(name(r));
            case "nonreentrantFair":
                return client.getNonReentrantFairLock(name(r));
            case "multi": {
                List<RLock> locks = new ArrayList<>();
                for (JsonNode name : r.path("names")) {
                    locks.add(client.getLock(name.asText()));
                }
                return client.getMultiLock(locks.toArray(new RLock[0]));
            }
            default:
                throw new IllegalArgumentException("no kind " + kind);
        }
    }

    private static long lease(JsonNode r) {
        return r.path("lease").asLong(-1);
    }

    private static long wait(JsonNode r) {
        return r.path("wait").asLong(0);
    }

    private static Object lock(JsonNode r, String op, RLock lock) throws Exception {
        switch (op) {
            case "lock":
                lock.lock(lease(r), TimeUnit.MILLISECONDS);
                return null;
            case "tryLock":
                return lock.tryLock(wait(r), lease(r), TimeUnit.MILLISECONDS);
            case "unlock":
                lock.unlock();
                return null;
            case "forceUnlock":
                return lock.forceUnlock();
            case "holdCount":
                return lock.getHoldCount();
            case "ttl":
                return lock.remainTimeToLive();
            case "isLocked":
                return lock.isLocked();
            case "heldByMe":
                return lock.isHeldByCurrentThread();
            case "lockToken":
                return lease(r) < 0
                        ? fenced(lock).lockAndGetToken()
                        : fenced(lock).lockAndGetToken(lease(r), TimeUnit.MILLISECONDS);
            case "tryLockToken":
                return fenced(lock).tryLockAndGetToken(wait(r), lease(r), TimeUnit.MILLISECONDS);
            case "token":
                return fenced(lock).getToken();
            default:
                throw new IllegalArgumentException("no lock op " + op);
        }
    }

    private static RFencedLock fenced(RLock lock) {
        if (!(lock instanceof RFencedLock)) {
            throw new IllegalArgumentException("not a fenced lock");
        }
        return (RFencedLock) lock;
    }

    private static Object permits(JsonNode r, String op, RPermitExpirableSemaphore s)
            throws Exception {
        switch (op) {
            case "trySetPermits":
                return s.trySetPermits(r.path("n").asInt());
            case "addPermits":
                s.addPermits(r.path("n").asInt());
                return null;
            case "available":
                return s.availablePermits();
            case "acquire":
                return lease(r) < 0 ? s.acquire() : s.acquire(lease(r), TimeUnit.MILLISECONDS);
            case "tryAcquire":
                return s.tryAcquire(wait(r), lease(r), TimeUnit.MILLISECONDS);
            case "release":
                s.release(r.path("permit").asText());
                return null;
            default:
                throw new IllegalArgumentException("no permits op " + op);
        }
    }

    private static Object semaphore(JsonNode r, String op, RSemaphore s) throws Exception {
        int n = r.path("n").asInt(1);
        switch (op) {
            case "trySetPermits":
                return s.trySetPermits(n);
            case "addPermits":
                s.addPermits(n);
                return null;
            case "available":
                return s.availablePermits();
            case "acquire":
                s.acquire(n);
                return null;
            case "tryAcquire":
                return s.tryAcquire(n, wait(r), TimeUnit.MILLISECONDS);
            case "release":
                s.release(n);
                return null;
            default:
                throw new IllegalArgumentException("no semaphore op " + op);
        }
    }

    private static Object latch(JsonNode r, String op, RCountDownLatch latch) throws Exception {
        switch (op) {
            case "trySetCount":
                return latch.trySetCount(r.path("n").asLong());
            case "countDown":
                latch.countDown();
                return null;
            case "await":
                return latch.await(wait(r), TimeUnit.MILLISECONDS);
            case "count":
                return latch.getCount();
            default:
                throw new IllegalArgumentException("no latch op " + op);
        }
    }
}
