// Package agentproto is the protocol between the kubenode harness and vmagent, its command
// runner inside the VM node: a POST of a Request to /exec with the run's token in X-Token,
// answered by a Response.
package agentproto

// Request is one command: its argv, its standard input and a time bound in seconds.
type Request struct {
	Argv    []string `json:"argv"`
	Stdin   []byte   `json:"stdin,omitempty"`
	Timeout int      `json:"timeout"`
}

// Response is the command's combined output and exit code (-1: it could not run or timed out).
type Response struct {
	Output []byte `json:"output"`
	Exit   int    `json:"exit"`
	Error  string `json:"error,omitempty"`
}
