package cmp

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	yaml "go.yaml.in/yaml/v3"
)

// ConfigFileName is the file that opts an app directory into the plugin (plugin.yaml's
// discover.fileName) and says how to render it.
const ConfigFileName = ".stagecoach.yaml"

// Renderer names a way of turning an app directory into objects.
type Renderer string

const (
	RendererPlain     Renderer = "plain"
	RendererKustomize Renderer = "kustomize"
	RendererHelm      Renderer = "helm"
)

// AppConfig is the content of .stagecoach.yaml:
//
//	stage: payments                # the Stage this app belongs to (stagecoach.dev/stage annotation)
//	images:                        # repositories pinned to STAGECOACH_DIGEST
//	  - registry.example/payments
//	renderer: kustomize            # optional: plain, kustomize or helm (default: detected)
type AppConfig struct {
	Stage    string   `yaml:"stage"`
	Images   []string `yaml:"images"`
	Renderer Renderer `yaml:"renderer"`
}

// readAppConfig reads .stagecoach.yaml from dir; rel is how errors name the file.
func readAppConfig(dir, rel string) (AppConfig, error) {
	data, err := os.ReadFile(filepath.Join(dir, ConfigFileName))
	if errors.Is(err, os.ErrNotExist) {
		return AppConfig{}, fmt.Errorf("%s not found: the stagecoach plugin renders only app directories that declare their stage and images in it", rel)
	}
	if err != nil {
		return AppConfig{}, fmt.Errorf("failed to read %s: %w", rel, err)
	}
	var cfg AppConfig
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&cfg); err != nil && !errors.Is(err, io.EOF) {
		return AppConfig{}, yamlError(rel, rel, err)
	}
	if strings.TrimSpace(cfg.Stage) == "" {
		return AppConfig{}, fmt.Errorf("%s: stage is empty: set `stage: <name of the Stage>`", rel)
	}
	switch cfg.Renderer {
	case "", RendererPlain, RendererKustomize, RendererHelm:
	default:
		return AppConfig{}, fmt.Errorf("%s: renderer %q is not one of plain, kustomize, helm (or leave it out to detect)", rel, cfg.Renderer)
	}
	for _, img := range cfg.Images {
		if _, err := parseImage(img); err != nil {
			return AppConfig{}, fmt.Errorf("%s: images: %w", rel, err)
		}
	}
	return cfg, nil
}
