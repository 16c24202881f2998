import com.sun.management.HotSpotDiagnosticMXBean;
import java.lang.management.ManagementFactory;

// Test workload for the jvm package tests and the hsperfdata fixtures: allocates steadily so
// young collections happen, calls System.gc() once for a full/concurrent cycle, runs one named
// application thread, and prints one "ready" line with what the VM decided about itself (its
// own view, no attach needed). With the argument "idle" it stops allocating after that, so the
// counters stay still while a test compares readers. Compiled with --release 11 so the same
// class runs on JDK 11, 17 and 21.
public class QuotaBusy {
    static volatile Object sink;

    public static void main(String[] args) throws Exception {
        boolean idle = args.length > 0 && args[0].equals("idle");
        Thread worker = new Thread(() -> {
            while (true) {
                try {
                    Thread.sleep(1000);
                } catch (InterruptedException e) {
                    return;
                }
            }
        }, "quota-worker");
        worker.setDaemon(true);
        worker.start();
        Object[] live = new Object[256];
        long start = System.nanoTime();
        boolean ready = false;
        for (long i = 0; ; i++) {
            live[(int) (i & 255)] = new byte[16 * 1024];
            sink = new byte[1024];
            if ((i & 0xFFFF) == 0) {
                long ms = (System.nanoTime() - start) / 1_000_000;
                if (!ready && ms > 300) {
                    System.gc();
                    HotSpotDiagnosticMXBean hs = ManagementFactory.getPlatformMXBean(HotSpotDiagnosticMXBean.class);
                    System.out.println("ready cpus=" + Runtime.getRuntime().availableProcessors()
                            + " pgc=" + hs.getVMOption("ParallelGCThreads").getValue()
                            + " cgc=" + hs.getVMOption("ConcGCThreads").getValue()
                            + " ci=" + hs.getVMOption("CICompilerCount").getValue());
                    System.out.flush();
                    ready = true;
                    if (idle) {
                        live = null;
                        while (true) {
                            Thread.sleep(60_000);
                        }
                    }
                }
                Thread.sleep(5);
            }
        }
    }
}
