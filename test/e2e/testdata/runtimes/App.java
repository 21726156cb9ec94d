// A JVM service as PID 1 would run it (`java App.java`, a single-file
// launch): it stays up until it is stopped. The JVM handles SIGTERM itself
// (it runs the shutdown hooks and exits 143) unless started with -Xrs. With
// the argument "handle" it installs its own SIGTERM handler, which exits 0.
// With "hook" its shutdown hook waits on a lock that a worker thread holds
// for ever: a shutdown that never finishes.
public class App {
    public static void main(String[] args) throws InterruptedException {
        if (args.length > 0 && args[0].equals("handle")) {
            sun.misc.Signal.handle(new sun.misc.Signal("TERM"), s -> System.exit(0));
        }
        if (args.length > 0 && args[0].equals("hook")) {
            final Object lock = new Object();
            Thread worker = new Thread(() -> {
                synchronized (lock) {
                    try { Thread.sleep(Long.MAX_VALUE); } catch (InterruptedException e) { }
                }
            });
            worker.setDaemon(true);
            worker.start();
            Runtime.getRuntime().addShutdownHook(new Thread(() -> { synchronized (lock) { } }));
        }
        System.out.println("ready");
        Thread.sleep(Long.MAX_VALUE);
    }
}
