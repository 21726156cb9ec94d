// Command kubectl-sigscope is the kubectl plugin `kubectl sigscope`: every
// node agent's stop episodes and audits through the API server
// (docs/kubectl.md). The work is in package kubeplugin.
package main
