package identity

// Running is a running container and the host pid of its PID 1.
type Running struct {
	Info Info
	PID  int // host pid of the container's main process (Info.MainPID); 0 when the runtime did not say
}
