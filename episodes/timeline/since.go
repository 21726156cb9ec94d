package timeline

import "container/list"

// procKey names a process across pid reuse: its host pid and its pid
// namespace.
type procKey struct{ pid, ns uint32 }

// starts remembers the main processes whose start was seen (their exec
// from outside their namespace, which a container's first process does), so
// that an episode of theirs is known to be whole even when it comes soon
// after tracing began. It is bounded by Options.MaxOpen, oldest out first:
// a start forgotten only makes an early episode say it may be incomplete.
type starts struct {
	set   map[procKey]*list.Element
	order list.List
	max   int
}

func (s *starts) add(k procKey) {
	if s.set == nil {
		s.set = make(map[procKey]*list.Element)
	}
	if el, ok := s.set[k]; ok {
		s.order.MoveToBack(el)
		return
	}
	if len(s.set) >= s.max {
		old := s.order.Front()
		s.order.Remove(old)
		delete(s.set, old.Value.(procKey))
	}
	s.set[k] = s.order.PushBack(k)
}

func (s *starts) seen(k procKey) bool {
	_, ok := s.set[k]
	return ok
}

// forget drops a process that has ended: its pid may come back as another.
func (s *starts) forget(k procKey) {
	if el, ok := s.set[k]; ok {
		s.order.Remove(el)
		delete(s.set, k)
	}
}
