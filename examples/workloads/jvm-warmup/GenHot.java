// GenHot writes the Java source of many small, distinct methods for the warm-up workload:
// each becomes hot at its own time and the JIT compilers (C1, then C2) must compile every one.
// Run as a single-file program: java GenHot.java <out-dir> [methods]
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;

public class GenHot {
    static final int PER_CLASS = 50;

    public static void main(String[] args) throws IOException {
        Path out = Path.of(args[0]);
        int methods = args.length > 1 ? Integer.parseInt(args[1]) : 6000;
        int classes = (methods + PER_CLASS - 1) / PER_CLASS;
        Files.createDirectories(out);
        for (int c = 0; c < classes; c++) {
            StringBuilder s = new StringBuilder("final class Hot" + c + " {\n");
            s.append("    static long call(int j, long x) {\n        switch (j) {\n");
            for (int m = 0; m < PER_CLASS; m++) {
                s.append("            case ").append(m).append(": return m").append(m).append("(x);\n");
            }
            s.append("            default: return x;\n        }\n    }\n");
            for (int m = 0; m < PER_CLASS; m++) {
                int id = c * PER_CLASS + m;
                // Distinct constants and shapes so no two methods compile to the same code.
                s.append("    static long m").append(m).append("(long x) {\n")
                 .append("        long a = x ^ ").append(0x9E3779B97F4A7C15L * (id + 1)).append("L;\n")
                 .append("        for (int k = 0; k < ").append(4 + id % 7).append("; k++) {\n")
                 .append("            a = a * ").append(31 + 2 * id).append(" + (k ^ ").append(id % 13).append(");\n")
                 .append("            if ((a & ").append(1 + id % 5).append(") == 1) a ^= a >>> ").append(1 + id % 31)
                 .append("; else a += ").append(id * 977L + 1).append(";\n")
                 .append("            switch ((int) (a & 3)) {\n")
                 .append("                case 0: a += ").append(id * 7919L).append("L; break;\n")
                 .append("                case 1: a ^= a << ").append(1 + id % 11).append("; break;\n")
                 .append("                case 2: a = Long.rotateLeft(a, ").append(1 + id % 61).append("); break;\n")
                 .append("                default: a -= ").append(id * 104729L).append("L;\n")
                 .append("            }\n")
                 .append("        }\n        return a;\n    }\n");
            }
            s.append("}\n");
            Files.writeString(out.resolve("Hot" + c + ".java"), s);
        }
        StringBuilder d = new StringBuilder("final class HotMethods {\n");
        d.append("    static final int COUNT = ").append(methods).append(";\n");
        d.append("    static long call(int i, long x) {\n        switch (i / ").append(PER_CLASS).append(") {\n");
        for (int c = 0; c < classes; c++) {
            d.append("            case ").append(c).append(": return Hot").append(c)
             .append(".call(i % ").append(PER_CLASS).append(", x);\n");
        }
        d.append("            default: return x;\n        }\n    }\n}\n");
        Files.writeString(out.resolve("HotMethods.java"), d);
    }
}
