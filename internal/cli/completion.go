package cli

// shells are the shells `digestpin completion SHELL` writes a script for.
var shells = []string{"bash", "zsh", "fish"}

// flagValues are the values a flag takes, for completion (completeFlagValues): a list of words,
// or fileValue / dirValue for a path.
var flagValues = map[string][]string{
	"mode":        {"pin", "digest", "annotate"},
	"on-error":    {"fail", "keep"},
	"mirror-lag":  {"error", "warn", "off"},
	"progress":    {"auto", "always", "never"},
	"filename":    {fileValue},
	"ca-file":     {fileValue},
	"pull-secret": {fileValue},
	"write-lock":  {fileValue},
	"lock":        {fileValue},
	"report":      {fileValue},
	"log-file":    {fileValue},
	"config":      {fileValue},
	"cache-dir":   {dirValue},

	// The change set's files (summary.go).
	"diff-against": {fileValue},
	"summary":      {fileValue},
	"summary-text": {fileValue},

	// The Redis flags (pin/pinflags/redis.go).
	"redis-password-file": {fileValue},
	"redis-ca-file":       {fileValue},
}

const (
	fileValue = "<file>"
	dirValue  = "<dir>"
)
