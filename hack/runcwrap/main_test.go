package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// How dockerd calls its runtime: global flags with values, then the command.
func TestRewriteFindsTheFilesRuncReads(t *testing.T) {
	dir := t.TempDir()
	config := filepath.Join(dir, "config.json")
	process := filepath.Join(dir, "process.json")
	all := []any{"CAP_CHOWN", "CAP_SYS_ADMIN", "CAP_SYS_RESOURCE"}
	write := func(file string, doc map[string]any) {
		raw, _ := json.Marshal(doc)
		if err := os.WriteFile(file, raw, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	caps := func() map[string]any {
		return map[string]any{"bounding": all, "effective": all, "permitted": all}
	}
	write(config, map[string]any{"ociVersion": "1.0.2", "process": map[string]any{"capabilities": caps(), "args": []any{"/sbin/init"}}})
	write(process, map[string]any{"capabilities": caps(), "args": []any{"sh"}})

	if err := rewrite(
		[]string{"--root", "/run/runc", "--log", "/x/log.json", "--log-format", "json", "create", "--bundle", dir, "--pid-file", "/x/pid", "id"},
	); err != nil {
		t.Fatal(err)
	}
	if err := rewrite([]string{"--root", "/run/runc", "exec", "--process=" + process, "--detach", "id"}); err != nil {
		t.Fatal(err)
	}
	want := []any{"CAP_CHOWN", "CAP_SYS_ADMIN"}
	for file, path := range map[string][]string{config: {"process", "capabilities"}, process: {"capabilities"}} {
		raw, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		var doc map[string]any
		if err := json.Unmarshal(raw, &doc); err != nil {
			t.Fatal(err)
		}
		node := doc
		for _, key := range path {
			node = node[key].(map[string]any)
		}
		for _, set := range []string{"bounding", "effective", "permitted"} {
			if got := node[set]; !reflect.DeepEqual(got, want) {
				t.Errorf("%s %s: %v, want %v", filepath.Base(file), set, got, want)
			}
		}
	}
	raw, _ := os.ReadFile(config)
	var doc map[string]any
	_ = json.Unmarshal(raw, &doc)
	if doc["ociVersion"] != "1.0.2" || doc["process"].(map[string]any)["args"] == nil {
		t.Errorf("other fields changed: %s", raw)
	}
}

// Commands that read no capabilities are passed through untouched.
func TestRewriteLeavesOtherCommandsAlone(t *testing.T) {
	for _, args := range [][]string{{"--version"}, {"--root", "/run/runc", "delete", "--force", "id"}, {"state", "id"}, {"features"}} {
		if err := rewrite(args); err != nil {
			t.Errorf("%v: %v", args, err)
		}
	}
}
