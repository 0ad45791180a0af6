import java.util.concurrent.ArrayBlockingQueue;
import java.util.concurrent.BlockingQueue;

/**
 * A three-thread pipeline on blocking queues, for tests/real_java.rs: a ticker sleeps and
 * puts a number, a relay takes it and puts it on, a sink takes it. The sink and the relay
 * wait in their own methods (QueueDemo.sink, QueueDemo.relay), which the JIT compiles
 * early (-Xcomp, or after enough calls), or the interpreter runs (-Xint). Runs for the
 * number of ticks in args[0] (default 400) at args[1] ms each (default 5); writes its pid to
 * the file $QUEUE_DEMO_PIDFILE names, if set, once its threads run.
 */
public class QueueDemo {
    static final BlockingQueue<Long> first = new ArrayBlockingQueue<>(4);
    static final BlockingQueue<Long> second = new ArrayBlockingQueue<>(4);
    static volatile long total;

    static void ticker(int ticks, long ms) throws InterruptedException {
        for (long i = 0; i < ticks; i++) {
            Thread.sleep(ms);
            first.put(i);
        }
        first.put(-1L);
    }

    static void relay() throws InterruptedException {
        for (;;) {
            long v = first.take();
            second.put(v);
            if (v < 0) {
                return;
            }
        }
    }

    static void sink() throws InterruptedException {
        for (;;) {
            long v = second.take();
            if (v < 0) {
                return;
            }
            total += v;
        }
    }

    public static void main(String[] args) throws Exception {
        int ticks = args.length > 0 ? Integer.parseInt(args[0]) : 400;
        long ms = args.length > 1 ? Long.parseLong(args[1]) : 5;
        Thread s = new Thread(() -> {
            try {
                sink();
            } catch (InterruptedException e) {
                throw new RuntimeException(e);
            }
        }, "sink");
        Thread r = new Thread(() -> {
            try {
                relay();
            } catch (InterruptedException e) {
                throw new RuntimeException(e);
            }
        }, "relay");
        Thread t = new Thread(() -> {
            try {
                ticker(ticks, ms);
            } catch (InterruptedException e) {
                throw new RuntimeException(e);
            }
        }, "ticker");
        s.start();
        r.start();
        t.start();
        // For tests that look at the running JVM (jstack): its pid, once the pipeline runs.
        String pidfile = System.getenv("QUEUE_DEMO_PIDFILE");
        if (pidfile != null) {
            java.nio.file.Files.writeString(java.nio.file.Path.of(pidfile),
                    Long.toString(ProcessHandle.current().pid()));
        }
        t.join();
        r.join();
        s.join();
        System.out.println("total " + total);
    }
}
