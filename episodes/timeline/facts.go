package timeline

import (
	"net/netip"
	"time"

	"github.com/sigscope/sigscope/containers/identity"
)

// An episode is finished in one place, once: the engine settles it from
// the kernel's record (its steps, its main process, how the stop went),
// and [Finish] applies what was learnt of it elsewhere (the [Facts]), then
// decides its outcome and its causes, then words it. Nothing outside this
// package assigns a field of an episode but the API's envelope (its ID and
// node).

// Facts are what is learnt of a stop outside the kernel, as plain values:
// who the container is, when its runtime named it after the engine took
// its identity, and what the API server said of its pod. The zero Facts
// is none (a recording replayed).
type Facts struct {
	// Container is what the resolver knows now of the episode's
	// container, when the engine took less (a runtime that was slow to
	// name it, or whose files named it first); nil: nothing new.
	Container *identity.Info
	// NameUnknown says why a container known by its ID only has no name:
	// what asking its runtime gave ("" when it is named).
	NameUnknown string
	// Kube is what the API server's records say of the pod of a pod's
	// container; nil for any other container.
	Kube *KubeFacts
	// PeerNames is what the agent knew, at the stop, of the addresses of
	// the clients that lost requests (Episode.PeerAddrs); an address it
	// did not know is absent.
	PeerNames map[netip.Addr]PeerName
}

// KubeFacts are the API server's records of a pod's container's stop:
// why the kubelet stopped it, the grace it applied and where that came
// from, the pod's workload, and its endpoints.
type KubeFacts struct {
	// Unread says why the records were not read; the rest is empty then.
	Unread KubeUnread
	Reason string // StopReason
	Owner  *Owner
	// Revision is the pod's template, as its controller labelled it; nil
	// when none did.
	Revision *Revision
	// Grace is the grace period the kubelet applied, from GraceFrom; 0
	// with a GraceFrom (the kubelet's rule) when the records do not tell
	// it.
	Grace     time.Duration
	GraceFrom GraceSource
	// EndpointsRead: the pod's EndpointSlices were read, and Endpoints
	// is what they said (nil: the pod is in none); else EndpointsWhy
	// says why not.
	EndpointsRead bool
	Endpoints     []EndpointChange
	EndpointsWhy  string
}

// KubeUnread is why the API server's records of a pod were not read.
type KubeUnread string

const (
	KubeRead KubeUnread = ""
	// KubeNotSynced: a client was given, and had not read the records
	// (yet) when the stop completed.
	KubeNotSynced KubeUnread = "the API server was not read"
	// KubeNoClient: the agent was started without one.
	KubeNoClient KubeUnread = "no Kubernetes client (sigscope serve --kube-events)"
	// KubeNoAPIServer: sigscope timeline was given no --kubeconfig.
	KubeNoAPIServer KubeUnread = "no API server (--kubeconfig)"
)

// GraceSource is where the grace period the kubelet applied comes from, as
// the API server's records tell it (Episode.GraceFrom, "grace_from" in the
// JSON): its value is the words. A rule (GraceSource.Rule) is a grace the
// records do not tell: the kubelet's rule for it, said instead of a figure.
type GraceSource string

const (
	GraceFromDeletion             GraceSource = "the pod's deletion (deletionGracePeriodSeconds)"
	GraceFromPod                  GraceSource = "the pod's terminationGracePeriodSeconds"
	GraceFromLivenessProbe        GraceSource = "the liveness probe's terminationGracePeriodSeconds"
	GraceFromStartupProbe         GraceSource = "the startup probe's terminationGracePeriodSeconds"
	GraceFromLocalStorageEviction GraceSource = "the kubelet's eviction for a local storage limit (1 s, raised to the kubelet's minimum of 2 s)"

	// The kubelet's rules for a grace its records do not tell: said
	// instead of a figure (KubeFacts.Grace is 0 with them).
	GraceRuleNodePressure GraceSource = "a node-pressure eviction: 1 s raised to the kubelet's minimum of 2 s after a hard threshold, the lesser of evictionMaxPodGracePeriod and the pod's terminationGracePeriodSeconds after a soft one; the kubelet's thresholds are not read"
	GraceRuleEviction     GraceSource = "an eviction by the kubelet whose message this version does not know"
	GraceRuleNodeShutdown GraceSource = "the kubelet's shutdownGracePeriod for the pod's priority, or the pod's terminationGracePeriodSeconds when less: the kubelet's configuration is not read"
)

// What Episode.NotLearnt says of a pod's records that were not read, and
// of a grace they do not tell.
const (
	notLearntRecords = "stop_reason, owner and the applied grace period: "
	notLearntGrace   = "the applied grace period: "
)

// Finish finishes an episode the engine settled (Options.Settled) with
// what was learnt of it outside the kernel, once: it applies the facts,
// then decides the outcome and the causes, then writes every sentence.
// An episode the engine did not settle (one built by hand, or read back
// from JSON) gets the facts only.
func Finish(ep *Episode, f Facts) {
	w := ep.settled
	if w == nil {
		ep.learn(f)
		for i := range ep.Steps {
			if s := &ep.Steps[i]; s.Kind == StepEndpoint && s.Text == "" {
				s.Text = stepText(s) // the steps the facts added
			}
		}
		return
	}
	ep.settled = nil
	w.Episode = *ep
	w.settle()
	w.learn(f)
	w.Outcome = decide(w.facts())
	w.words(w.causes())
	*ep = w.Episode
}

// learn sets what the facts say: the container's identity when the
// resolver knows more now, and the API server's record of its pod, in
// the order the episode's not_learnt lists what was not.
func (ep *Episode) learn(f Facts) {
	c := &ep.Container
	if f.Container != nil && f.Container.Name != "" && f.Container.ID == c.ID && (c.Name == "" || c.IdentityFrom != "") {
		*c = ContainerOf(f.Container, c.PidNS)
	} else if c.ID != "" && c.Name == "" && f.NameUnknown != "" {
		c.NameUnknown = f.NameUnknown
	}
	if ep.Traffic != nil {
		ep.Traffic.NamePeers(f.PeerNames)
	}
	k := f.Kube
	if k == nil || c.Pod == "" {
		return
	}
	if k.Unread != KubeRead {
		ep.NotLearnt = append(ep.NotLearnt, notLearntRecords+string(k.Unread))
		return
	}
	ep.StopReason, ep.Owner, ep.Revision = k.Reason, k.Owner, k.Revision
	switch {
	case ep.StopAt.IsZero():
		// Only a stop signal began a grace: a container that ended by
		// itself (a crash, restarted after) or was SIGKILLed at once (one
		// that was still starting) was given none, whatever the pod's
		// records say.
	case k.Grace > 0:
		ep.GracePeriod, ep.GraceFrom = k.Grace, k.GraceFrom
	case k.GraceFrom != "":
		// A grace the records do not tell: the kubelet's rule, rather
		// than none or a guess.
		ep.NotLearnt = append(ep.NotLearnt, notLearntGrace+string(k.GraceFrom))
	}
	if !k.EndpointsRead {
		ep.NotLearnt = append(ep.NotLearnt, EndpointsNotRead(k.EndpointsWhy))
		return
	}
	ep.Endpoints = k.Endpoints
	ep.addEndpointSteps()
}
