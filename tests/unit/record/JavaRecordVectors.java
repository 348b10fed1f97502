// Writes the Java-side golden batches of golden.py (JAVA_BATCHES) with Apache Kafka's own client.
//
//   CP=kafka-clients-4.1.1.jar:lz4-java-1.8.0.jar:snappy-java-1.1.10.7.jar:zstd-jni-1.5.6-10.jar:slf4j-api-1.7.36.jar
//   javac -cp "$CP" JavaRecordVectors.java
//   for c in none gzip snappy lz4 zstd; do java -cp "$CP:." JavaRecordVectors $c > $c.hex; done
//
// Not run by the test suite (it needs a JVM and the jars); kept so the vectors can be regenerated.

import java.nio.ByteBuffer;
import org.apache.kafka.common.compress.Compression;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeader;
import org.apache.kafka.common.record.MemoryRecords;
import org.apache.kafka.common.record.MemoryRecordsBuilder;
import org.apache.kafka.common.record.TimestampType;

public class JavaRecordVectors {
    public static void main(String[] args) {
        Compression compression = switch (args[0]) {
            case "gzip" -> Compression.gzip().build();
            case "snappy" -> Compression.snappy().build();
            case "lz4" -> Compression.lz4().build();
            case "zstd" -> Compression.zstd().build();
            default -> Compression.NONE;
        };
        MemoryRecordsBuilder builder =
            MemoryRecords.builder(ByteBuffer.allocate(1 << 16), compression, TimestampType.CREATE_TIME, 0L);
        builder.append(1700000000000L, "key".getBytes(), "value".getBytes(),
            new Header[]{new RecordHeader("h\u00e9", "x".getBytes()), new RecordHeader("h\u00e9", null)});
        builder.append(1699999999000L, null, new byte[0], new Header[0]);
        builder.append(1700000000500L, new byte[0], null, new Header[0]);
        byte[] big = new byte[300];
        for (int i = 0; i < big.length; i++) big[i] = (byte) ((i * 31 + (i >> 7)) & 0xff);
        builder.append(1700000001000L, "big".getBytes(), big, new Header[0]);
        ByteBuffer out = builder.build().buffer();
        StringBuilder hex = new StringBuilder();
        while (out.hasRemaining()) hex.append(String.format("%02x", out.get()));
        System.out.println(hex);
    }
}
