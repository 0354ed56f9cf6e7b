package report

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"
)

// Save writes res as JSON to dir/<prefix><time>.json.
func Save(dir, prefix string, res any) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	path := filepath.Join(dir, prefix+time.Now().UTC().Format("20060102-150405")+".json")
	fmt.Println("results:", path)
	return WriteJSON(path, res)
}

// WriteJSON writes res as indented JSON to path.
func WriteJSON(path string, res any) error {
	data, err := json.MarshalIndent(res, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, data, 0o644)
}

// Machine names this machine's cores, CPU model and Go version, for a result.
func Machine() string {
	model := "unknown CPU"
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(line, "model name") {
				model = strings.TrimSpace(strings.SplitN(line, ":", 2)[1])
				break
			}
		}
	}
	return fmt.Sprintf("%d cores, %s, %s", runtime.NumCPU(), model, runtime.Version())
}
