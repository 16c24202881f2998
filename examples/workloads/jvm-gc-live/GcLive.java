// GcLive is a paced JVM service with a live set of its own size: it keeps LIVE MiB reachable
// (a cache), allocates GARBAGE MiB/s of short-lived objects in 10 ticks a second, and replaces
// CHURN percent of the cache per second (entries expire), so the old generation fills and a
// full collection marks the whole live set now and then. Run with many more parallel GC
// threads than its CPU limit (-XX:ActiveProcessorCount=24 gives 18): with a large live set
// each full collection's threads burn the quota together and the JVM is throttled in bursts
// (seed 000, the LinkedIn case); with a small one the collections are too short to be.
//
// ENTRY is the cache's entry size in bytes (default 4096): the smaller, the more objects a full
// collection marks and moves for the same live set, the longer it runs (measured at 0.5 cores,
// 18 threads, 250 MiB live: 4096 B -> 90-100 ms full pauses, 4% of periods throttled; 1024 B ->
// 180-250 ms, 8%; 256 B -> 0.5-0.6 s, 15%; 64 B -> ~2 s, 37%).
//
// Usage: java -XX:ActiveProcessorCount=24 -XX:+UseParallelGC -Xmx512m GcLive LIVE GARBAGE CHURN [ENTRY]
public class GcLive {
    public static void main(String[] args) throws Exception {
        int liveMiB = Integer.parseInt(args[0]);
        int garbageMiB = Integer.parseInt(args[1]);
        int churnPct = Integer.parseInt(args[2]);
        int entry = args.length > 3 ? Integer.parseInt(args[3]) : 4096;
        System.out.printf("GcLive: live set %d MiB in %d-byte entries, %d MiB/s garbage, %d%%/s of the cache replaced, JVM sees %d CPUs%n",
                liveMiB, entry, garbageMiB, churnPct, Runtime.getRuntime().availableProcessors());
        // A live set of many objects, as a cache has, for the marking to follow.
        byte[][] cache = new byte[(int) ((long) liveMiB * 1024 * 1024 / (entry + 16))][];
        for (int i = 0; i < cache.length; i++) cache[i] = new byte[entry];
        int churnPerTick = Math.max(1, cache.length * churnPct / 100 / 10);
        Object[] recent = new Object[256];
        long n = 0, next = 0;
        java.util.Random rnd = new java.util.Random(1);
        long tick = System.nanoTime();
        while (true) {
            for (int i = 0; i < garbageMiB * 1024 / 10; i++) recent[(int) (n++ % recent.length)] = new byte[1024];
            for (int i = 0; i < churnPerTick; i++) cache[rnd.nextInt(cache.length)] = new byte[entry];
            tick += 100_000_000L;
            long sleep = (tick - System.nanoTime()) / 1_000_000L;
            if (sleep > 0) Thread.sleep(sleep);
            else tick = System.nanoTime();
        }
    }
}
