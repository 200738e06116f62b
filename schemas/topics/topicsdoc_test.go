package topics_test

import (
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"rental/schemas/topics"
)

// docs/topics.md describes every topic of the catalogue with the catalogue's key,
// partitions, retention and cleanup, and names only schema files that exist.
func TestTopicsDocMatchesTheCatalogue(t *testing.T) {
	b, err := os.ReadFile("../../docs/topics.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	rows := map[string][]string{} // first cell's topic names -> the row's cells
	for _, line := range strings.Split(doc, "\n") {
		if !strings.HasPrefix(line, "| `") {
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), "|")
		for i := range cells {
			cells[i] = strings.TrimSpace(cells[i])
		}
		for _, name := range regexp.MustCompile("`([a-z0-9.]+)`").FindAllStringSubmatch(cells[0], -1) {
			rows[name[1]] = cells
		}
	}
	retention := func(tp topics.Topic) string {
		switch {
		case tp.Retention == 0:
			return "forever"
		case tp.Retention%(24*time.Hour) == 0:
			return fmt.Sprintf("%d days", tp.Retention/(24*time.Hour))
		}
		return tp.Retention.String()
	}
	for _, tp := range topics.All() {
		name := tp.Name
		if strings.HasPrefix(name, "webhooks.retry.") { // one row covers the nine steps
			name = "webhooks.retry.1.v1"
			if _, ok := rows["webhooks.retry.9.v1"]; !ok || len(topics.WebhookRetry) != 9 {
				t.Errorf("the retry row does not cover %d steps", len(topics.WebhookRetry))
			}
		}
		cells, ok := rows[name]
		if !ok || len(cells) < 5 {
			t.Errorf("%s: no row in docs/topics.md", tp.Name)
			continue
		}
		if want := fmt.Sprint(tp.Partitions); cells[2] != want {
			t.Errorf("%s: partitions %q, catalogue %s", tp.Name, cells[2], want)
		}
		if !strings.HasPrefix(cells[3], retention(tp)) {
			t.Errorf("%s: retention %q, catalogue %s", tp.Name, cells[3], retention(tp))
		}
		if cells[4] != string(tp.Cleanup) {
			t.Errorf("%s: cleanup %q, catalogue %s", tp.Name, cells[4], tp.Cleanup)
		}
		if tp.Key != "ordering key" && !strings.Contains(cells[1], tp.Key) {
			t.Errorf("%s: key %q, catalogue %s", tp.Name, cells[1], tp.Key)
		}
	}
	for _, m := range regexp.MustCompile("[a-z]+\\.schema\\.json").FindAllString(doc, -1) {
		if _, err := os.Stat("../events/" + m); err != nil {
			t.Errorf("docs/topics.md names %s: %v", m, err)
		}
	}
}
