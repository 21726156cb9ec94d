module github.com/sigscope/sigscope

go 1.26.8

require (
	github.com/cilium/ebpf v0.22.0
	github.com/spf13/cobra v1.10.2
	golang.org/x/sys v0.49.0
	google.golang.org/grpc v1.82.1
	k8s.io/cri-api v0.37.2
)

require (
	github.com/inconshreveable/mousetrap v1.1.0 // indirect
	github.com/spf13/pflag v1.0.10 // indirect
	golang.org/x/net v0.57.0 // indirect
	golang.org/x/text v0.40.0 // indirect
	google.golang.org/genproto/googleapis/rpc v0.0.0-20260526163538-3dc84a4a5aaa // indirect
	google.golang.org/protobuf v1.36.12-0.20260120151049-f2248ac996af // indirect
)

tool github.com/cilium/ebpf/cmd/bpf2go
