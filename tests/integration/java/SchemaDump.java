import java.lang.reflect.ParameterizedType;
import java.util.Collection;
import java.util.HashMap;
import java.util.Map;
import java.util.TreeMap;

import org.apache.kafka.common.Uuid;
import org.apache.kafka.common.message.ApiMessageType;
import org.apache.kafka.common.protocol.types.BoundField;
import org.apache.kafka.common.protocol.types.Field;
import org.apache.kafka.common.protocol.types.Schema;
import org.apache.kafka.common.protocol.types.TaggedFields;
import org.apache.kafka.common.protocol.types.Type;

/**
 * Prints the wire layout of Apache Kafka's generated message schemas as one JSON document.
 *
 * <p>Usage: {@code java -cp <kafka classpath>:<dir> SchemaDump <api key>...}. For every API key,
 * every version kafka-clients has (up to the highest unstable one), request and response:
 *
 * <pre>
 * {"apis": [{"api_key": 0, "name": "Produce", "lowest": 3, "highest": 13, "highest_unstable": 13,
 *            "versions": [{"version": 3, "request_header": 1, "response_header": 0,
 *                          "request": STRUCT, "response": STRUCT}, ...]}, ...]}
 * STRUCT = {"kind": "STRUCT", "nullable": false,
 *           "fields": [FIELD, ...],           the regular fields, in wire order
 *           "tagged": null | [FIELD, ...]}    null: no tagged-field section (not flexible)
 * FIELD  = {"name": "acks", "tag": null | 0, "default": DEFAULT, "type": TYPE}
 * TYPE   = STRUCT
 *        | {"kind": "ARRAY" | "COMPACT_ARRAY", "nullable": b, "element": TYPE}
 *        | {"kind": "INT16" | "COMPACT_NULLABLE_STRING" | "RECORDS" | ..., "nullable": b}
 * </pre>
 *
 * Names and types come from the generated {@code Schema} objects (names are already snake_case).
 * Those carry no defaults, so DEFAULT is read from a fresh instance of the generated data class
 * (e.g. {@code ProduceRequestData}): a JSON number, boolean, string or null, {@code []} for an
 * empty collection, {@code "uuid:<32 hex>"}, {@code "bytes:<hex>"}; struct fields have no
 * "default" (their fields carry their own). The JSON is built by hand: no library is needed.
 */
public final class SchemaDump {
    private static final String TAGGED_FIELDS = "_tagged_fields";

    private SchemaDump() {
    }

    public static void main(String[] args) throws ReflectiveOperationException {
        StringBuilder out = new StringBuilder("{\"apis\": [");
        for (int i = 0; i < args.length; i++) {
            out.append(i > 0 ? ",\n" : "");
            api(out, ApiMessageType.fromApiKey(Short.parseShort(args[i])));
        }
        System.out.println(out.append("]}"));
    }

    private static void api(StringBuilder out, ApiMessageType api)
            throws ReflectiveOperationException {
        short lowest = api.lowestSupportedVersion();
        short highestUnstable = api.highestSupportedVersion(true);
        Class<?> request = api.newRequest().getClass();
        Class<?> response = api.newResponse().getClass();
        out.append("{\"api_key\": ").append(api.apiKey())
            .append(", \"name\": ").append(quote(api.name))
            .append(", \"lowest\": ").append(lowest)
            .append(", \"highest\": ").append(api.highestSupportedVersion(false))
            .append(", \"highest_unstable\": ").append(highestUnstable)
            .append(", \"versions\": [");
        for (short v = lowest; v <= highestUnstable; v++) {
            out.append(v > lowest ? ",\n  " : "")
                .append("{\"version\": ").append(v)
                .append(", \"request_header\": ").append(api.requestHeaderVersion(v))
                .append(", \"response_header\": ").append(api.responseHeaderVersion(v))
                .append(", \"request\": ");
            struct(out, api.requestSchemas()[v], request);
            out.append(", \"response\": ");
            struct(out, api.responseSchemas()[v], response);
            out.append('}');
        }
        out.append("]}");
    }

    /** A struct; {@code data} is the generated class holding its fields (and their defaults). */
    private static void struct(StringBuilder out, Schema schema, Class<?> data)
            throws ReflectiveOperationException {
        Object fresh = data.getDeclaredConstructor().newInstance();
        Map<String, java.lang.reflect.Field> members = members(data);
        BoundField[] fields = schema.fields();
        TaggedFields tagged = null;
        out.append("{\"kind\": \"STRUCT\", \"nullable\": ").append(schema.isNullable())
            .append(", \"fields\": [");
        for (int i = 0; i < fields.length; i++) {
            Field def = fields[i].def;
            if (def.type instanceof TaggedFields) {
                if (!TAGGED_FIELDS.equals(def.name) || i != fields.length - 1) {
                    throw new IllegalStateException("tagged fields are not last in " + schema);
                }
                tagged = (TaggedFields) def.type;
                continue;
            }
            out.append(i > 0 ? ", " : "");
            field(out, def, null, members, fresh);
        }
        out.append("], \"tagged\": ");
        if (tagged == null) {
            out.append("null}");
            return;
        }
        out.append('[');
        String separator = "";
        for (Map.Entry<Integer, Field> entry : new TreeMap<>(tagged.fields()).entrySet()) {
            out.append(separator);
            field(out, entry.getValue(), entry.getKey(), members, fresh);
            separator = ", ";
        }
        out.append("]}");
    }

    private static void field(StringBuilder out, Field def, Integer tag,
                              Map<String, java.lang.reflect.Field> members, Object fresh)
            throws ReflectiveOperationException {
        java.lang.reflect.Field member = members.get(normalise(def.name));
        if (member == null) {
            throw new IllegalStateException("no member for field " + def.name + " in "
                + fresh.getClass().getName() + ": " + members.keySet());
        }
        out.append("{\"name\": ").append(quote(def.name)).append(", \"tag\": ").append(tag);
        if (!(def.type instanceof Schema)) {
            out.append(", \"default\": ").append(value(member.get(fresh)));
        }
        out.append(", \"type\": ");
        type(out, def.type, member.getGenericType());
        out.append('}');
    }

    /** A field type; {@code declared} is the Java type of the member holding it. */
    private static void type(StringBuilder out, Type type, java.lang.reflect.Type declared)
            throws ReflectiveOperationException {
        if (type instanceof Schema) {
            struct(out, (Schema) type, (Class<?>) declared);
            return;
        }
        if (!(type instanceof Type.DocumentedType) || type instanceof TaggedFields) {
            throw new IllegalStateException(
                "unexpected type " + type.getClass().getName() + ": " + type);
        }
        out.append("{\"kind\": ").append(quote(((Type.DocumentedType) type).typeName()))
            .append(", \"nullable\": ").append(type.isNullable());
        if (type.isArray()) {
            out.append(", \"element\": ");
            type(out, type.arrayElementType().get(), elementType(declared));
        }
        out.append('}');
    }

    /** X, the element type of a {@code List<X>} or an {@code XCollection} member. */
    private static java.lang.reflect.Type elementType(java.lang.reflect.Type declared) {
        if (declared instanceof ParameterizedType) {
            return ((ParameterizedType) declared).getActualTypeArguments()[0];
        }
        java.lang.reflect.Type parent = ((Class<?>) declared).getGenericSuperclass();
        return ((ParameterizedType) parent).getActualTypeArguments()[0];
    }

    /** The data class's members by normalised name (v3AndBelowTopics meets v3_and_below_topics). */
    private static Map<String, java.lang.reflect.Field> members(Class<?> data) {
        Map<String, java.lang.reflect.Field> members = new HashMap<>();
        for (java.lang.reflect.Field member : data.getDeclaredFields()) {
            if (!java.lang.reflect.Modifier.isStatic(member.getModifiers())) {
                member.setAccessible(true);
                members.put(normalise(member.getName()), member);
            }
        }
        return members;
    }

    private static String normalise(String name) {
        return name.replace("_", "").toLowerCase(java.util.Locale.ROOT);
    }

    private static String value(Object value) {
        if (value == null || value instanceof Boolean || value instanceof Number) {
            return String.valueOf(value);
        }
        if (value instanceof String) {
            return quote((String) value);
        }
        if (value instanceof Uuid) {
            Uuid uuid = (Uuid) value;
            return quote(String.format("uuid:%016x%016x", uuid.getMostSignificantBits(),
                uuid.getLeastSignificantBits()));
        }
        if (value instanceof byte[]) {
            StringBuilder hex = new StringBuilder("bytes:");
            for (byte b : (byte[]) value) {
                hex.append(String.format("%02x", b));
            }
            return quote(hex.toString());
        }
        if (value instanceof Collection && ((Collection<?>) value).isEmpty()) {
            return "[]";
        }
        return quote("unexpected " + value.getClass().getName() + ": " + value);
    }

    private static String quote(String text) {
        StringBuilder out = new StringBuilder("\"");
        for (char c : text.toCharArray()) {
            if (c == '"' || c == '\\') {
                out.append('\\').append(c);
            } else if (c < 0x20) {
                out.append(String.format("\\u%04x", (int) c));
            } else {
                out.append(c);
            }
        }
        return out.append('"').toString();
    }
}
