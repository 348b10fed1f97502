# The image of docker-compose.yml's `spark` service: Python, Java 17 and this package with PySpark,
# so `spark-submit jobs/...` runs in Spark local mode next to the three Kafka brokers.
# Debian bookworm still ships Java 17, which Spark 4 supports.
FROM python:3.11-slim-bookworm

RUN apt-get update \
 && apt-get install -y --no-install-recommends openjdk-17-jre-headless procps \
 && rm -rf /var/lib/apt/lists/*

WORKDIR /opt/spark-kafka-sink
COPY setup.cfg pyproject.toml README.md ./
COPY spark_kafka_sink ./spark_kafka_sink
RUN pip install --no-cache-dir '.[spark,zstd,snappy]' confluent-kafka
COPY conf ./conf
COPY jobs ./jobs
COPY demo ./demo

ENV PYSPARK_PYTHON=python3 \
    SPARK_LOCAL_IP=127.0.0.1 \
    KAFKA_BOOTSTRAP=kafka-1:9092,kafka-2:9092,kafka-3:9092
CMD ["sleep", "infinity"]
