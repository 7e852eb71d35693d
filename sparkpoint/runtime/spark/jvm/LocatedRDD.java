package org.sparkpoint.spark;

import java.util.ArrayList;
import java.util.List;

import org.apache.spark.Partition;
import org.apache.spark.SparkEnv;
import org.apache.spark.TaskContext;
import org.apache.spark.rdd.RDD;
import scala.collection.Iterator;
import scala.collection.immutable.Seq;
import scala.jdk.javaapi.CollectionConverters;
import scala.reflect.ClassTag;
import scala.reflect.ClassTag$;

/**
 * A one-to-one view of a parent RDD whose partitions prefer given task locations, the way Spark
 * Structured Streaming's StateStoreRDD asks for the executor that holds a state store.
 *
 * <p>Locations are Spark's task-location strings ({@code executor_<host>_<executorId>} for one
 * executor, or a host name). Each task also learns where it runs: the local property
 * {@value #PROPERTY} holds its own executor's location, which PySpark hands to the Python worker.
 */
public class LocatedRDD<T> extends RDD<T> {
    public static final String PROPERTY = "sparkpoint.task.location";
    private final String[][] locations;

    @SuppressWarnings("unchecked")
    public LocatedRDD(RDD<T> parent, String[][] locations) {
        super(parent, (ClassTag<T>) ClassTag$.MODULE$.AnyRef());
        this.locations = locations;
    }

    @Override
    public Partition[] getPartitions() {
        return firstParent(elementClassTag()).partitions();
    }

    @Override
    public Iterator<T> compute(Partition split, TaskContext context) {
        SparkEnv env = SparkEnv.get();
        String host = env.blockManager().blockManagerId().host();
        context.getLocalProperties().setProperty(PROPERTY, "executor_" + host + "_" + env.executorId());
        RDD<T> parent = firstParent(elementClassTag());
        return parent.iterator(split, context);
    }

    @Override
    public Seq<String> getPreferredLocations(Partition split) {
        int i = split.index();
        List<String> here = new ArrayList<>();
        if (i < locations.length && locations[i] != null) {
            for (String location : locations[i]) {
                if (location != null) {
                    here.add(location);
                }
            }
        }
        return CollectionConverters.asScala(here).toList();
    }
}
