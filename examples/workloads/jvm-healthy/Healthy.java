// Healthy is the JVM control: GC and JIT threads sized to its 2-core quota
// (-XX:ActiveProcessorCount=2 -XX:ParallelGCThreads=2) and a light, steady load. It should
// raise no alert and be throttled little or not at all.
//
// Usage: java -XX:ActiveProcessorCount=2 -XX:ParallelGCThreads=2 -Xmx128m Healthy [MiB/s]
public class Healthy {
    public static void main(String[] args) throws Exception {
        int mibPerSecond = args.length > 0 ? Integer.parseInt(args[0]) : 20;
        System.out.printf("Healthy: allocating %d MiB/s, JVM sees %d CPUs%n",
                mibPerSecond, Runtime.getRuntime().availableProcessors());
        Object[] recent = new Object[1024];
        long n = 0;
        while (true) {
            // 10 ticks a second, each allocating a tenth of the rate in 1 KiB objects.
            for (int i = 0; i < mibPerSecond * 1024 / 10; i++) {
                recent[(int) (n++ % recent.length)] = new byte[1024];
            }
            Thread.sleep(100);
        }
    }
}
