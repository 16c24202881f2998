// GcStorm reproduces the LinkedIn case (seed 000): an allocation-heavy JVM whose parallel GC
// runs many more threads than its CPU quota. Started with -XX:ActiveProcessorCount=24 the JVM
// sizes ParallelGCThreads to 18; each young collection wakes all 18 threads, they burn the
// cgroup's quota within a few milliseconds and the whole cgroup (application threads included)
// is throttled for the rest of the 100 ms period. The GC log shows a short pause; the
// application sees a much longer stall.
//
// Usage: java -XX:ActiveProcessorCount=24 -XX:+UseParallelGC -Xms96m -Xmx96m GcStorm [threads]
import java.util.concurrent.ThreadLocalRandom;

public class GcStorm {
    // Objects kept alive for a while so that every young collection has survivors to copy:
    // that copying is the parallel work the 18 GC threads share.
    static final int LIVE_SLOTS = 1 << 13;

    public static void main(String[] args) throws Exception {
        int threads = args.length > 0 ? Integer.parseInt(args[0]) : 2;
        Runtime rt = Runtime.getRuntime();
        System.out.printf("GcStorm: %d allocating threads, JVM sees %d CPUs, max heap %d MiB%n",
                threads, rt.availableProcessors(), rt.maxMemory() >> 20);
        for (int i = 0; i < threads; i++) {
            Thread t = new Thread(GcStorm::allocate, "allocator-" + i);
            t.setDaemon(true);
            t.start();
        }
        // Report the longest time the main thread failed to wake on schedule: the stall the
        // application saw, which throttling makes far longer than the GC pause itself.
        long worstMs = 0, lastReport = System.nanoTime();
        while (true) {
            long before = System.nanoTime();
            Thread.sleep(10);
            long lateMs = (System.nanoTime() - before) / 1_000_000 - 10;
            worstMs = Math.max(worstMs, lateMs);
            if (System.nanoTime() - lastReport > 10_000_000_000L) {
                System.out.printf("GcStorm: worst wake-up delay in the last 10 s: %d ms%n", worstMs);
                worstMs = 0;
                lastReport = System.nanoTime();
            }
        }
    }

    static void allocate() {
        Object[] live = new Object[LIVE_SLOTS];
        ThreadLocalRandom rnd = ThreadLocalRandom.current();
        long sink = 0;
        while (true) {
            // Mostly short-lived garbage, one object in 16 replaces a long-lived slot.
            byte[] b = new byte[64 + rnd.nextInt(1024)];
            sink += b.length;
            if ((sink & 15) == 0) {
                live[rnd.nextInt(LIVE_SLOTS)] = b;
            }
        }
    }
}
