// Runs in the v2 VM: prints the processor count the JVM sized itself for, then idles so the
// exporter can read its perf data. -XX:+PrintFlagsFinal (given by the scenario) prints the
// GC and JIT thread counts before main starts. java.base only: the jlinked runtime has
// nothing else. Compiled with --release 11 so every JDK from 11 on runs it.
public class JvmProbe {
    public static void main(String[] args) throws Exception {
        System.out.println("cpus=" + Runtime.getRuntime().availableProcessors());
        System.out.println("version=" + System.getProperty("java.version"));
        System.out.println("READY");
        System.out.flush();
        while (true) {
            Thread.sleep(60_000);
        }
    }
}
