// Package markdown writes text from elsewhere (repository content and its diffs,
// names read from a team's cluster) into the GitHub-flavoured Markdown of pull
// request bodies, check runs and comments so that it is shown as written. A diff's
// context line " ```" closed the fixed fence around it, and every line after it was
// read as Markdown: a hostile repository could mention people, link and show images
// in a pull request the service opened.
package markdown

import (
	"strings"
)

// CodeBlock fences body as a code block with the info string info ("diff"). The
// fence is a run of backticks longer than any in body, so no line of body can close
// it (a closing fence must be at least as long as the opening one).
func CodeBlock(info, body string) string {
	fence := strings.Repeat("`", max(3, longestRun(body, '`')+1))
	body = strings.TrimRight(body, "\n")
	if body == "" {
		return fence + info + "\n" + fence + "\n"
	}
	return fence + info + "\n" + body + "\n" + fence + "\n"
}

// Code writes s as a code span: delimited by a run of backticks longer than any in
// s, and padded with a space where s begins or ends with a backtick, which would
// otherwise join the delimiter. Line breaks become spaces, as a span shows them.
func Code(s string) string {
	s = strings.NewReplacer("\r\n", " ", "\n", " ", "\r", " ").Replace(s)
	delim := strings.Repeat("`", longestRun(s, '`')+1)
	if strings.HasPrefix(s, "`") || strings.HasSuffix(s, "`") {
		s = " " + s + " "
	}
	return delim + s + delim
}

// Name writes s as it is when Markdown can only read it as itself: letters, digits,
// spaces, ".", "-" and "/" (a Kubernetes name, most paths), not beginning a
// "www." link. Anything else (a name read from a repository's manifests that holds
// "@team", "![", "_") is written as Code, so the names the service writes look as
// they always did and a hostile one is shown, not read.
func Name(s string) string {
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune(" .-/", r)) {
			return Code(s)
		}
	}
	if strings.Contains(strings.ToLower(s), "www.") {
		return Code(s)
	}
	return s
}

// Cell makes md (already Markdown: a name from Name, a span from Code) one cell
// of a table row: a "|" ends a cell even inside a code span, so it is escaped, as
// GitHub reads "\\|" in a span as "|".
func Cell(md string) string { return strings.ReplaceAll(md, "|", `\|`) }

// CodeLine writes s as a code span on one line, each run of white space in it one
// space: a reason or message from elsewhere, which may span lines, in a sentence.
func CodeLine(s string) string { return Code(strings.Join(strings.Fields(s), " ")) }

// OpenFence returns the fence a code block of text opens and leaves open at its end
// ("```"), or "" when every block text opens is closed: what a line of its own must
// hold, after text, to close the block. It reads fences as CommonMark does: up to
// three spaces, then three or more backticks or tildes; a block is closed by a run
// of its character at least as long, with nothing after it but spaces.
func OpenFence(text string) string {
	open := ""
	for line := range strings.Lines(text) {
		line = strings.TrimRight(line, "\r\n")
		fence, rest, ok := fenceOf(line)
		if !ok {
			continue
		}
		switch {
		case open == "":
			if fence[0] == '`' && strings.Contains(rest, "`") {
				continue // an info string holding a backtick opens no block
			}
			open = fence
		case fence[0] == open[0] && len(fence) >= len(open) && strings.TrimRight(rest, " \t") == "":
			open = ""
		}
	}
	return open
}

// fenceOf splits a line into a fence (its run of three or more backticks or tildes
// after at most three spaces of indentation) and the rest.
func fenceOf(line string) (fence, rest string, ok bool) {
	body := strings.TrimLeft(line, " ")
	if len(line)-len(body) > 3 || body == "" || (body[0] != '`' && body[0] != '~') {
		return "", "", false
	}
	n := 0
	for n < len(body) && body[n] == body[0] {
		n++
	}
	if n < 3 {
		return "", "", false
	}
	return body[:n], body[n:], true
}

// longestRun is the length of the longest run of c in s.
func longestRun(s string, c byte) int {
	longest, run := 0, 0
	for i := 0; i < len(s); i++ {
		if s[i] != c {
			run = 0
			continue
		}
		run++
		longest = max(longest, run)
	}
	return longest
}
