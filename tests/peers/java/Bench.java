// Redisson's side of the benchmark's "vs Redisson" rows (examples/bench.rs), timed inside
// this JVM with System.nanoTime. Run with the URL of a Redis server and a warm-up count:
//
//   java -cp classes:lib/4.7.0/* Bench redis://127.0.0.1:6379 5000
//
// It warms up first (that many lock+unlock pairs and read pairs, the GET + SET sections
// for a second, a tenth as many hand-offs), prints `ready`, then answers one line per
// request line, until stdin closes:
//
//   uncontended N              -> nanoseconds for N RLock lock+unlock pairs on one thread
//   sections THREADS MILLIS K  -> sections done by THREADS threads in MILLIS, each section
//                                 lock, GET K, SET K to one more, unlock; K must come out
//                                 exact
//   handoff N                  -> N hand-offs in nanoseconds, space-separated: unlock()
//                                 called by one thread to lock() returning in another
//   readers THREADS MILLIS     -> read lock+unlock pairs done by THREADS threads in MILLIS
//
// and `error MESSAGE` when a request fails.

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.SynchronousQueue;
import java.util.concurrent.atomic.AtomicBoolean;
import org.redisson.Redisson;
import org.redisson.api.RBucket;
import org.redisson.api.RLock;
import org.redisson.api.RedissonClient;
import org.redisson.client.codec.StringCodec;
import org.redisson.config.Config;

public final class Bench {
    private static RedissonClient client;
    private static Handoff handoff;

    public static void main(String[] args) throws Exception {
        String url = args[0].endsWith("/") ? args[0].substring(0, args[0].length() - 1) : args[0];
        int warmup = Integer.parseInt(args[1]);
        Config config = new Config();
        config.useSingleServer().setAddress(url);
        client = Redisson.create(config);
        handoff = new Handoff(client.getLock("bench:vs-handoff:java"));

        uncontended(warmup);
        readers(1, 0, warmup);
        sections(4, 1000, "bench:vs-warmup:java");
        handoff(Math.max(1, warmup / 10));
        System.out.println("ready");
        System.out.flush();

        BufferedReader in =
                new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null) {
            String[] w = line.split(" ");
            String answer;
            try {
                switch (w[0]) {
                    case "uncontended":
                        answer = Long.toString(uncontended(Integer.parseInt(w[1])));
                        break;
                    case "sections":
                        answer = Long.toString(
                                sections(Integer.parseInt(w[1]), Long.parseLong(w[2]), w[3]));
                        break;
                    case "handoff":
                        answer = handoff(Integer.parseInt(w[1]));
                        break;
                    case "readers":
                        answer = Long.toString(
                                readers(Integer.parseInt(w[1]), Long.parseLong(w[2]), 0));
                        break;
                    default:
                        answer = "error unknown request " + line;
                }
            } catch (Throwable e) {
                answer = "error " + e;
            }
            System.out.println(answer);
            System.out.flush();
        }
        Runtime.getRuntime().halt(0);
    }

    private static long uncontended(int pairs) {
        RLock lock = client.getLock("bench:vs-uncontended:java");
        long started = System.nanoTime();
        for (int i = 0; i < pairs; i++) {
            lock.lock();
            lock.unlock();
        }
        return System.nanoTime() - started;
    }

    private static long sections(int threads, long millis, String key) throws Exception {
        RLock lock = client.getLock("bench:vs-gs:java");
        RBucket<String> counter = client.getBucket(key, StringCodec.INSTANCE);
        counter.delete();
        AtomicBoolean stop = new AtomicBoolean();
        long[] counts = new long[threads];
        List<Thread> workers = new ArrayList<>();
        for (int t = 0; t < threads; t++) {
            int slot = t;
            Thread worker = new Thread(() -> {
                long count = 0;
                while (!stop.get()) {
                    lock.lock();
                    String value = counter.get();
                    counter.set(Long.toString(value == null ? 1 : Long.parseLong(value) + 1));
                    lock.unlock();
                    count++;
                }
                counts[slot] = count;
            });
            worker.start();
            workers.add(worker);
        }
        Thread.sleep(millis);
        stop.set(true);
        long total = 0;
        for (int t = 0; t < threads; t++) {
            workers.get(t).join();
            total += counts[t];
        }
        String value = counter.get();
        if (value == null ? total != 0 : Long.parseLong(value) != total) {
            throw new IllegalStateException("two holders at once: " + value + " != " + total);
        }
        return total;
    }

    /** Read pairs of `threads` threads for `millis`, or else `pairs` pairs on this one. */
    private static long readers(int threads, long millis, int pairs) throws Exception {
        RLock read = client.getReadWriteLock("bench:vs-rw:java").readLock();
        if (pairs > 0) {
            for (int i = 0; i < pairs; i++) {
                read.lock();
                read.unlock();
            }
            return pairs;
        }
        AtomicBoolean stop = new AtomicBoolean();
        long[] counts = new long[threads];
        List<Thread> workers = new ArrayList<>();
        for (int t = 0; t < threads; t++) {
            int slot = t;
            Thread worker = new Thread(() -> {
                long count = 0;
                while (!stop.get()) {
                    read.lock();
                    read.unlock();
                    count++;
                }
                counts[slot] = count;
            });
            worker.start();
            workers.add(worker);
        }
        Thread.sleep(millis);
        stop.set(true);
        long total = 0;
        for (int t = 0; t < threads; t++) {
            workers.get(t).join();
            total += counts[t];
        }
        return total;
    }

    private static String handoff(int n) throws Exception {
        StringBuilder samples = new StringBuilder();
        for (int i = 0; i < n; i++) {
            if (i > 0) {
                samples.append(' ');
            }
            samples.append(handoff.sample());
        }
        return samples.toString();
    }

    /** A waiting thread that takes the lock whenever it is told to. */
    private static final class Handoff {
        private final RLock lock;
        private final SynchronousQueue<Boolean> go = new SynchronousQueue<>();
        private final SynchronousQueue<Long> got = new SynchronousQueue<>();

        Handoff(RLock lock) {
            this.lock = lock;
            Thread waiter = new Thread(() -> {
                try {
                    while (true) {
                        go.take();
                        lock.lock();
                        got.put(System.nanoTime());
                        lock.unlock();
                    }
                } catch (InterruptedException e) {
                    // the JVM is ending
                }
            });
            waiter.setDaemon(true);
            waiter.start();
        }

        /** One hand-off: from unlock() called here to the waiter's lock() returning. */
        long sample() throws InterruptedException {
            lock.lock();
            go.put(true);
            Thread.sleep(3); // let the waiter block
            long released = System.nanoTime();
            lock.unlock();
            return got.take() - released;
        }
    }
}
