// Package docs checks the documentation against the code it describes: every field of every CRD
// is documented on the page of its kind, every relative link of README.md and docs/ resolves (to a
// file, and to a heading for an #anchor into a Markdown file), every page is reachable from the
// index, and the README stays one screen. It reads files only: no API server.
package docs

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"
)

// readmeMaxLines keeps the README one screen: what Stagecoach is, the two commands, the demo, the
// feature table and links. Reference material belongs in docs/.
const readmeMaxLines = 150

// kindDocs says where each kind's fields are documented: a page of docs/ and, when the page
// documents several kinds, the slug of the heading whose section (with its subsections) is the
// kind's.
var kindDocs = map[string]struct{ page, section string }{
	"Stage":     {page: "stage.md"},
	"Promotion": {page: "promotion.md", section: "promotion"},
	"Approval":  {page: "promotion.md", section: "approval"},
	"Freeze":    {page: "promotion.md", section: "freeze"},
}

// repoRoot is the module root, two directories up from this package.
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	NewWithT(t).Expect(filepath.Join(root, "go.mod")).To(BeARegularFile())
	return root
}

// TestEveryCRDFieldIsDocumented walks each version's openAPIV3Schema of every CRD in
// manifests/crds and lists every field under spec and status. A field counts as documented when
// the section of its kind's page holds it as a backticked code span (array brackets such as
// `checks[]` are ignored):
//   - by its full path, `spec.applyRef.set` (the only way for a top-level field: `spec.suspend`);
//   - or by its path below an ancestor that a heading of the section names by full path: under a
//     heading "`spec.applyRef`", `set` or `set.path`; under "`spec.source.registry`",
//     `verify.secretRef.name`. The ancestor must be below spec or status itself.
func TestEveryCRDFieldIsDocumented(t *testing.T) {
	root := repoRoot(t)
	files, err := filepath.Glob(filepath.Join(root, "manifests", "crds", "*.yaml"))
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	NewWithT(t).Expect(files).NotTo(BeEmpty(), "no CRDs in manifests/crds")

	type crdCase struct {
		name   string
		kind   string
		fields []string
	}
	var cases []crdCase
	for _, file := range files {
		data, err := os.ReadFile(file)
		NewWithT(t).Expect(err).NotTo(HaveOccurred())
		var crd apiextensionsv1.CustomResourceDefinition
		NewWithT(t).Expect(yaml.UnmarshalStrict(data, &crd)).To(Succeed(), file)
		for _, v := range crd.Spec.Versions {
			NewWithT(t).Expect(v.Schema).NotTo(BeNil(), "%s %s has no schema", file, v.Name)
			NewWithT(t).Expect(v.Schema.OpenAPIV3Schema).NotTo(BeNil(), "%s %s has no openAPIV3Schema", file, v.Name)
			cases = append(cases, crdCase{
				name:   crd.Spec.Names.Kind + "/" + v.Name,
				kind:   crd.Spec.Names.Kind,
				fields: fieldPaths(*v.Schema.OpenAPIV3Schema),
			})
		}
	}

	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			where, ok := kindDocs[tc.kind]
			g.Expect(ok).To(BeTrue(), "kind %s has no page in kindDocs: give it one in docs/ and a line here", tc.kind)
			g.Expect(tc.fields).NotTo(BeEmpty(), "no fields found under spec and status")
			page := parseMarkdown(t, filepath.Join(root, "docs", where.page))
			sections := page.scope(where.section)
			g.Expect(sections).NotTo(BeEmpty(), "docs/%s has no heading #%s for kind %s", where.page, where.section, tc.kind)

			t.Logf("%d fields under spec and status, documented in docs/%s", len(tc.fields), where.page)
			var missing []string
			for _, field := range tc.fields {
				if !documented(field, sections) {
					missing = append(missing, field)
				}
			}
			at := "docs/" + where.page
			if where.section != "" {
				at += "#" + where.section
			}
			g.Expect(missing).To(BeEmpty(), "%d field(s) of %s not documented in %s (as `%s`, or below an ancestor a heading names):\n  %s",
				len(missing), tc.name, at, "spec.x.y", strings.Join(missing, "\n  "))
		})
	}
}

// fieldPaths lists every field under spec and status of a kind's schema, as dotted paths without
// array brackets, sorted.
func fieldPaths(schema apiextensionsv1.JSONSchemaProps) []string {
	var out []string
	var walk func(prefix string, s apiextensionsv1.JSONSchemaProps)
	walk = func(prefix string, s apiextensionsv1.JSONSchemaProps) {
		for name, child := range s.Properties {
			path := prefix + "." + name
			out = append(out, path)
			walk(path, child)
		}
		if s.Items != nil && s.Items.Schema != nil {
			walk(prefix, *s.Items.Schema)
		}
		if s.AdditionalProperties != nil && s.AdditionalProperties.Schema != nil {
			walk(prefix, *s.AdditionalProperties.Schema)
		}
	}
	for _, top := range []string{"spec", "status"} {
		if s, ok := schema.Properties[top]; ok {
			walk(top, s)
		}
	}
	sort.Strings(out)
	return out
}

// documented reports whether a field is named in the sections, by the rule of
// TestEveryCRDFieldIsDocumented.
func documented(field string, sections []section) bool {
	for _, s := range sections {
		if s.spans[field] {
			return true
		}
		for ancestor := range s.headingSpans {
			if strings.Count(ancestor, ".") < 1 || !strings.HasPrefix(field, ancestor+".") {
				continue
			}
			if s.treeSpans[strings.TrimPrefix(field, ancestor+".")] {
				return true
			}
		}
	}
	return false
}

// TestLinksResolve checks every relative link and image of README.md and docs/*.md: the file
// exists, and an #anchor into a Markdown file (or the page itself) names one of its headings, as
// GitHub makes their anchors.
func TestLinksResolve(t *testing.T) {
	root := repoRoot(t)
	pages := markdownPages(t, root)
	for _, rel := range pages {
		t.Run(rel, func(t *testing.T) {
			g := NewWithT(t)
			page := parseMarkdown(t, filepath.Join(root, rel))
			var broken []string
			for _, l := range page.links {
				if err := checkLink(root, filepath.Join(root, rel), l.target); err != nil {
					broken = append(broken, fmt.Sprintf("line %d: (%s): %v", l.line, l.target, err))
				}
			}
			g.Expect(broken).To(BeEmpty(), "broken links in %s:\n  %s", rel, strings.Join(broken, "\n  "))
		})
	}
}

// TestEveryPageIsInTheIndex checks that docs/README.md links every page of docs/, so that none
// is reachable only by chance.
func TestEveryPageIsInTheIndex(t *testing.T) {
	root := repoRoot(t)
	index := parseMarkdown(t, filepath.Join(root, "docs", "README.md"))
	linked := map[string]bool{}
	for _, l := range index.links {
		linked[strings.SplitN(l.target, "#", 2)[0]] = true
	}
	pages, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	for _, p := range pages {
		name := filepath.Base(p)
		if name == "README.md" {
			continue
		}
		t.Run(name, func(t *testing.T) {
			NewWithT(t).Expect(linked[name]).To(BeTrue(), "docs/README.md does not link %s", name)
		})
	}
}

// TestREADMEIsOneScreen keeps README.md under readmeMaxLines lines.
func TestREADMEIsOneScreen(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(repoRoot(t), "README.md"))
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	lines := strings.Count(string(data), "\n")
	NewWithT(t).Expect(lines).To(BeNumerically("<", readmeMaxLines),
		"README.md has %d lines; keep it one screen and move reference material to docs/", lines)
}

// markdownPages are README.md and every docs/*.md, relative to the root.
func markdownPages(t *testing.T, root string) []string {
	t.Helper()
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	NewWithT(t).Expect(docs).NotTo(BeEmpty(), "no pages in docs/")
	pages := []string{"README.md"}
	for _, d := range docs {
		pages = append(pages, filepath.Join("docs", filepath.Base(d)))
	}
	return pages
}

// checkLink resolves a link of the page at from.
func checkLink(root, from, target string) error {
	if isExternal(target) {
		return nil
	}
	path, anchor, _ := strings.Cut(target, "#")
	file := from
	if path != "" {
		file = filepath.Join(filepath.Dir(from), filepath.FromSlash(path))
		if _, err := os.Stat(file); err != nil {
			return fmt.Errorf("no such file %s", relTo(root, file))
		}
	}
	if anchor == "" || !strings.HasSuffix(file, ".md") {
		return nil
	}
	info, err := os.Stat(file)
	if err != nil || info.IsDir() {
		return fmt.Errorf("#%s into %s, which is not a file", anchor, relTo(root, file))
	}
	data, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	if !parseMarkdownText(string(data)).slugs[anchor] {
		return fmt.Errorf("%s has no heading #%s", relTo(root, file), anchor)
	}
	return nil
}

func relTo(root, file string) string {
	if rel, err := filepath.Rel(root, file); err == nil {
		return filepath.ToSlash(rel)
	}
	return file
}

var schemeRE = regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9+.-]*:`)

func isExternal(target string) bool {
	return schemeRE.MatchString(target) || strings.HasPrefix(target, "//")
}

// A page is a Markdown file cut at its headings.
type page struct {
	sections []section
	slugs    map[string]bool
	links    []link
}

type section struct {
	level int
	slug  string
	// headingSpans are the code spans of the heading, normalised.
	headingSpans map[string]bool
	// spans are the code spans of the section's own text (up to the next heading).
	spans map[string]bool
	// treeSpans are the code spans of the section and every subsection below it.
	treeSpans map[string]bool
}

type link struct {
	line   int
	target string
}

// scope is the section with the slug and its subsections; the whole page for "".
func (p page) scope(slug string) []section {
	if slug == "" {
		return p.sections
	}
	for i, s := range p.sections {
		if s.slug != slug {
			continue
		}
		end := i + 1
		for end < len(p.sections) && p.sections[end].level > s.level {
			end++
		}
		return p.sections[i:end]
	}
	return nil
}

func parseMarkdown(t *testing.T, file string) page {
	t.Helper()
	data, err := os.ReadFile(file)
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	return parseMarkdownText(string(data))
}

var (
	headingRE = regexp.MustCompile(`^(#{1,6})\s+(.*?)\s*#*\s*$`)
	fenceRE   = regexp.MustCompile("^\\s*(```|~~~)")
	spanRE    = regexp.MustCompile("`([^`]+)`")
	linkRE    = regexp.MustCompile(`!?\[((?:[^\[\]]|\[[^\[\]]*\])*)\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)`)
	bracketRE = regexp.MustCompile(`\[[^\]]*\]`)
)

// parseMarkdownText cuts Markdown at its headings (outside fenced code blocks), and collects each
// section's code spans, the page's heading anchors and its links.
func parseMarkdownText(text string) page {
	p := page{slugs: map[string]bool{}}
	seen := map[string]int{}
	current := section{spans: map[string]bool{}, headingSpans: map[string]bool{}}
	inFence := false
	for i, line := range strings.Split(text, "\n") {
		if fenceRE.MatchString(line) {
			inFence = !inFence
			continue
		}
		if inFence {
			continue
		}
		if m := headingRE.FindStringSubmatch(line); m != nil {
			p.sections = append(p.sections, current)
			slug := githubSlug(m[2])
			if n := seen[slug]; n > 0 {
				seen[slug]++
				slug = fmt.Sprintf("%s-%d", slug, n)
			} else {
				seen[slug] = 1
			}
			p.slugs[slug] = true
			current = section{level: len(m[1]), slug: slug, spans: map[string]bool{}, headingSpans: map[string]bool{}}
			for _, s := range codeSpans(m[2]) {
				current.headingSpans[s] = true
			}
			continue
		}
		for _, s := range codeSpans(line) {
			current.spans[s] = true
		}
		for _, m := range linkRE.FindAllStringSubmatch(spanRE.ReplaceAllString(line, ""), -1) {
			p.links = append(p.links, link{line: i + 1, target: m[2]})
		}
	}
	p.sections = append(p.sections, current)
	// treeSpans: a section's spans and those of every deeper section after it.
	for i := range p.sections {
		tree := map[string]bool{}
		for j := i; j < len(p.sections); j++ {
			if j > i && p.sections[j].level <= p.sections[i].level {
				break
			}
			for s := range p.sections[j].spans {
				tree[s] = true
			}
		}
		p.sections[i].treeSpans = tree
	}
	return p
}

// codeSpans are the line's backticked spans, normalised as field paths: array brackets
// (`checks[]`, `sources[0]`) and a leading dot dropped.
func codeSpans(line string) []string {
	var out []string
	for _, m := range spanRE.FindAllStringSubmatch(line, -1) {
		s := strings.TrimSpace(m[1])
		s = bracketRE.ReplaceAllString(s, "")
		s = strings.TrimPrefix(s, ".")
		out = append(out, s)
	}
	return out
}

var slugDropRE = regexp.MustCompile(`[^\p{L}\p{N}\p{M}\p{Pc} -]`)

// githubSlug is the anchor GitHub gives a heading: its text without Markdown (code ticks, emphasis,
// link targets), lower case, punctuation dropped, spaces turned into hyphens.
func githubSlug(heading string) string {
	text := linkRE.ReplaceAllString(heading, "$1")
	text = strings.NewReplacer("`", "", "*", "").Replace(text)
	text = strings.ToLower(text)
	text = slugDropRE.ReplaceAllString(text, "")
	return strings.ReplaceAll(text, " ", "-")
}

func TestGithubSlug(t *testing.T) {
	for _, tc := range []struct{ heading, slug string }{
		{"What the demo shows", "what-the-demo-shows"},
		{"Where to add …", "where-to-add-"},
		{"Any other kind: `applyRef.set` and completion rules", "any-other-kind-applyrefset-and-completion-rules"},
		{"`spec.promotion.checks[]`", "specpromotionchecks"},
		{"Signed records and following another cluster", "signed-records-and-following-another-cluster"},
		{"The [plugin](plugin.md) **install**", "the-plugin-install"},
		{"snake_case stays", "snake_case-stays"},
	} {
		t.Run(tc.heading, func(t *testing.T) {
			NewWithT(t).Expect(githubSlug(tc.heading)).To(Equal(tc.slug))
		})
	}
}
