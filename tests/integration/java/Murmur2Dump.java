import java.io.BufferedReader;
import java.io.BufferedWriter;
import java.io.InputStreamReader;
import java.io.OutputStreamWriter;
import java.nio.charset.StandardCharsets;

import org.apache.kafka.clients.producer.internals.BuiltInPartitioner;
import org.apache.kafka.common.utils.Utils;

/**
 * Prints Apache Kafka's murmur2 hash and keyed partition for keys read from stdin.
 *
 * <p>Usage: {@code java -cp <kafka classpath>:<dir> Murmur2Dump <partition count>...}. Each stdin
 * line is one key in hex (an empty line is the empty key). For each key one line is printed:
 *
 * <pre>
 * HASH P1 P2 ...
 * </pre>
 *
 * where HASH is {@code Utils.murmur2(key)} (signed decimal) and P<i>i</i> is
 * {@code BuiltInPartitioner.partitionForKey(key, count i)}, the producer's own keyed partition
 * ({@code toPositive(murmur2(key)) % count}).
 */
public final class Murmur2Dump {
    public static void main(String[] args) throws Exception {
        int[] counts = new int[args.length];
        for (int i = 0; i < args.length; i++) {
            counts[i] = Integer.parseInt(args[i]);
        }
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.US_ASCII));
        BufferedWriter out = new BufferedWriter(new OutputStreamWriter(System.out, StandardCharsets.US_ASCII));
        String line;
        while ((line = in.readLine()) != null) {
            byte[] key = fromHex(line.trim());
            StringBuilder row = new StringBuilder().append(Utils.murmur2(key));
            for (int count : counts) {
                row.append(' ').append(BuiltInPartitioner.partitionForKey(key, count));
            }
            out.write(row.append('\n').toString());
        }
        out.flush();
    }

    private static byte[] fromHex(String hex) {
        if (hex.length() % 2 != 0) {
            throw new IllegalArgumentException("odd-length hex key: " + hex);
        }
        byte[] out = new byte[hex.length() / 2];
        for (int i = 0; i < out.length; i++) {
            out[i] = (byte) Integer.parseInt(hex.substring(2 * i, 2 * i + 2), 16);
        }
        return out;
    }
}
