package journal

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	apiv1 "github.com/sigscope/sigscope/api/v1"
	"github.com/sigscope/sigscope/episodes/timeline"
	"github.com/sigscope/sigscope/exporter/sink"
)

// Defaults for [Options]. 8 files of 7 MiB bound the journal at 56 MiB,
// under the 64 MB a node's journal may take; with episode lines of 2-3 KB
// (docs/deploy.md has the arithmetic) a rotation, which removes the oldest
// file, still leaves 49 MiB: some 17,000 episodes, over a week of a node
// that stops a container every 40 s.
const (
	DefaultFileSize   = 7 << 20
	DefaultFiles      = 8
	DefaultQueue      = 256
	DefaultBackoff    = time.Second
	DefaultMaxBackoff = time.Minute
)

// Options configures a [Journal].
type Options struct {
	Dir string
	// FileSize is the most a file holds; a line that would take it over
	// begins the next file. Files is how many are kept, the one written
	// to included: the journal never holds more than Files × FileSize.
	FileSize int64
	Files    int
	// Keep is how many of the newest episodes Open reads back ([Journal.Loaded]).
	Keep int
	// Queue bounds the episodes waiting for the writer besides the one
	// being written; past it the oldest is dropped and counted.
	Queue int
	// Backoff is the wait after a failed write, doubled on each failure
	// up to MaxBackoff (plus up to a fifth, at random: retry.Backoff).
	Backoff, MaxBackoff time.Duration
	Logger              *slog.Logger
}

// Journal appends episodes to a directory's files from its own worker (a
// sink.Sink: the queue, retries and counts every output shares).
// ObserveEpisode and Close are safe from any goroutine.
type Journal struct {
	sink.Collector // sigscope_journal_*: metrics.go

	opts   Options
	log    *slog.Logger
	loaded Loaded
	lock   *os.File // the directory, flocked; nil when it could not be opened
	out    *sink.Sink[*timeline.Episode]

	skipped atomic.Uint64
	once    sync.Once
	err     error // Close's

	// The worker's alone (send and what it calls), then Close's.
	f       *os.File
	seq     uint64 // f's number
	size    int64  // f's size up to its last whole line
	newFile bool   // the next write begins a new file (f is closed or cut)
}

// Open reads the journal in opts.Dir back (its newest opts.Keep episodes
// and its last id; lines that are no episode are skipped, counted and
// logged); [Journal.Run] writes what it is given. It fails only on bad
// options and when another process holds the directory's lock (a second
// agent on the node): a directory that cannot be created or written is
// retried by the writer, since a full or read-only disk must not stop
// tracing.
func Open(opts Options) (*Journal, error) {
	if opts.Dir == "" {
		return nil, errors.New("journal: no directory")
	}
	if opts.FileSize <= 0 {
		opts.FileSize = DefaultFileSize
	}
	if opts.Files <= 0 {
		opts.Files = DefaultFiles
	}
	if opts.Queue <= 0 {
		opts.Queue = DefaultQueue
	}
	if opts.Backoff <= 0 {
		opts.Backoff = DefaultBackoff
	}
	if opts.MaxBackoff < opts.Backoff {
		opts.MaxBackoff = max(DefaultMaxBackoff, opts.Backoff)
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	j := &Journal{opts: opts, log: opts.Logger.With("journal", opts.Dir)}
	j.out = sink.New(sink.Options[*timeline.Episode]{
		QueueSize: opts.Queue,
		Send:      j.send,
		// A write fails for the disk, never for its line (a line too
		// large is refused at once): the line in hand is kept until the
		// disk takes it.
		KeepFailed: true,
		RetryMin:   opts.Backoff,
		RetryMax:   opts.MaxBackoff,
		Logger:     j.log,
		Log: sink.Messages{
			Down:    "journal write failed; tracing goes on and the write is retried",
			Again:   "journal write failed again",
			Up:      "journal writes again",
			UpLevel: slog.LevelInfo,
			Dropped: "episodes still queued at shutdown were not written to the journal",
		},
	})
	j.Collector = j.metrics()
	if err := os.MkdirAll(opts.Dir, 0o750); err != nil {
		j.log.Warn("cannot create the journal directory; episodes are written once it can be", "error", err)
	}
	if err := j.lockDir(); err != nil {
		return nil, err
	}
	start := time.Now()
	ld, err := Load(opts.Dir, opts.Keep)
	if err != nil {
		j.log.Warn("reading the journal back", "error", err)
	}
	j.loaded = ld
	j.skipped.Store(uint64(ld.Skipped))
	if ld.Skipped > 0 {
		j.log.Warn("journal lines skipped: not whole episodes (a line cut by power loss or a full disk)",
			"skipped", ld.Skipped, "first", ld.FirstSkipped)
	}
	j.log.Info("journal read", "files", ld.Files, "bytes", ld.Bytes, "episodes", ld.Lines,
		"kept", len(ld.Episodes), "last_id", ld.LastID, "took", time.Since(start).Round(time.Millisecond))
	return j, nil
}

// lockDir flocks the directory so that two agents never write one journal
// (their ids would collide). The lock goes with the process, however it
// ends.
func (j *Journal) lockDir() error {
	d, err := os.Open(j.opts.Dir)
	if err != nil {
		j.log.Warn("cannot lock the journal directory", "error", err)
		return nil
	}
	if err := syscall.Flock(int(d.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		_ = d.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return fmt.Errorf("journal %s: another process (a second sigscope serve?) writes it", j.opts.Dir)
		}
		j.log.Warn("cannot lock the journal directory", "error", err)
		return nil
	}
	j.lock = d
	return nil
}

// Loaded is what Open read back.
func (j *Journal) Loaded() Loaded { return j.loaded }

// ObserveEpisode queues ep for the writer and returns at once; when the
// queue is full (the disk is failing or slow) its oldest episode is
// dropped and counted. ep is copied: its slices must not change after, as
// for every completed episode.
func (j *Journal) ObserveEpisode(ep *timeline.Episode) {
	cp := *ep
	j.out.Add(&cp)
}

// Run writes the queued episodes until ctx ends or Close is called, then
// what is still queued, each once more (a failing disk is not waited for),
// within the sink's drain bound, and returns.
func (j *Journal) Run(ctx context.Context) { j.out.Run(ctx) }

// Close stops the writer (later episodes are dropped and counted) once it
// has written what was queued, or, when Run was never called, writes it
// here; then it syncs and closes the file and unlocks the directory. It
// is idempotent.
func (j *Journal) Close() error {
	_ = j.out.Close()
	j.once.Do(func() {
		j.err = j.closeFile()
		if j.lock != nil {
			_ = j.lock.Close()
		}
	})
	return j.err
}

// send is the sink's Send: one episode, encoded as the API serves it
// (apiv1.EpisodeLine) at each try (a retry comes a second or more after
// the last), and appended. An error is the disk's, and the line is tried
// again; a line that cannot be written at all is refused for good
// (counted as dropped).
func (j *Journal) send(ctx context.Context, batch []*timeline.Episode) (sink.Done, error) {
	if err := ctx.Err(); err != nil {
		return sink.Done{}, err // the drain gave up: not tried
	}
	ep := batch[0]
	line, err := apiv1.EpisodeLine(ep)
	if err != nil {
		j.log.Warn("an episode cannot be encoded for the journal", "id", ep.ID, "error", err)
		return sink.Done{Failed: 1}, nil
	}
	if int64(len(line)) > j.opts.FileSize {
		j.log.Warn("an episode is larger than a journal file (--journal-file-size): not written", "id", ep.ID, "bytes", len(line))
		return sink.Done{Failed: 1}, nil
	}
	if err := j.write(line); err != nil {
		return sink.Done{}, err
	}
	return sink.Done{Sent: 1}, nil
}

// write appends one line, beginning a new file when it would take the
// current one over FileSize. A partial write (the disk filled mid-line) is
// cut back, so that the next line begins on a line of its own; when even
// that fails the file is left and the next write begins a new one.
func (j *Journal) write(line []byte) error {
	if j.f == nil || j.newFile || j.size+int64(len(line)) > j.opts.FileSize {
		if err := j.openFile(); err != nil {
			return err
		}
	}
	n, err := j.f.Write(line)
	if err != nil {
		if n > 0 {
			if terr := j.f.Truncate(j.size); terr != nil {
				j.newFile = true
			}
		}
		return err
	}
	j.size += int64(n)
	return nil
}

// openFile opens the file to write: at the first write, the journal's
// newest when it has room and ends with a whole line; else the next
// number, after which the files beyond Files are removed.
func (j *Journal) openFile() error {
	if j.f == nil && !j.newFile {
		fs, err := listFiles(j.opts.Dir)
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
		if len(fs) > 0 {
			last := fs[len(fs)-1]
			j.seq = last.seq
			if f, size, ok := openForAppend(last.path); ok {
				if size < j.opts.FileSize {
					j.f, j.size = f, size
					return nil
				}
				_ = f.Close()
			}
		}
	}
	if err := os.MkdirAll(j.opts.Dir, 0o750); err != nil {
		return err
	}
	f, err := os.OpenFile(filepath.Join(j.opts.Dir, fileName(j.seq+1)), os.O_WRONLY|os.O_APPEND|os.O_CREATE|os.O_EXCL, 0o640)
	if err != nil {
		return err
	}
	if cerr := j.closeFile(); cerr != nil {
		j.log.Debug("closing the previous journal file", "error", cerr)
	}
	j.f, j.seq, j.size, j.newFile = f, j.seq+1, 0, false
	j.prune()
	return nil
}

// openForAppend opens a journal file to go on writing it, when its last
// byte ends a line: a file cut mid-line is left as it is (its last line
// is read as skipped) and writing goes on in a new one, where the next
// line cannot run into the cut one.
func openForAppend(path string) (*os.File, int64, bool) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_APPEND, 0)
	if err != nil {
		return nil, 0, false
	}
	st, err := f.Stat()
	if err != nil {
		_ = f.Close()
		return nil, 0, false
	}
	if st.Size() > 0 {
		var last [1]byte
		if _, err := f.ReadAt(last[:], st.Size()-1); (err != nil && err != io.EOF) || last[0] != '\n' {
			_ = f.Close()
			return nil, 0, false
		}
	}
	return f, st.Size(), true
}

// prune removes the oldest files beyond Files.
func (j *Journal) prune() {
	fs, err := listFiles(j.opts.Dir)
	if err != nil {
		j.log.Debug("listing the journal to rotate it", "error", err)
		return
	}
	for len(fs) > j.opts.Files {
		if err := os.Remove(fs[0].path); err != nil {
			j.log.Warn("cannot remove an old journal file", "file", fs[0].path, "error", err)
		}
		fs = fs[1:]
	}
}

// closeFile syncs and closes the file being written: rotation and
// shutdown are when the journal reaches the disk itself; in between each
// line is in the kernel's page cache as soon as it is written, which
// outlives the agent (a SIGKILL, an OOM kill), if not the node's power.
func (j *Journal) closeFile() error {
	if j.f == nil {
		return nil
	}
	serr := j.f.Sync()
	cerr := j.f.Close()
	j.f = nil
	j.newFile = true
	return errors.Join(serr, cerr)
}
