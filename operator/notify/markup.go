package notify

import "strings"

// A message carries text that nodes, tenants and Prometheus control: node names, blocker reasons
// (pod and PDB names, alert names), drain errors. Chat services read markup in it: Slack turns
// "<!channel>" into an @channel mention and "<https://evil|docs>" into a link, Discord pings on
// "@everyone", Teams renders Markdown links. Each message is escaped for its service's markup, so what
// the text says is what a person reads, and nothing in it can mention, link or format.

// escaper is the escaping of one service's markup (nil: plain text, nothing to escape).
func escaper(scheme string) func(string) string {
	switch scheme {
	case "slack", "mattermost", "rocketchat", "zulip":
		// Slack's own rule for message text (& < > as entities) closes mentions and links; the others
		// render Markdown and treat @channel/@all as mentions.
		return func(s string) string { return noMentions(markdown(entities(s))) }
	case "discord":
		return func(s string) string { return noMentions(markdown(s)) }
	case "teams", "googlechat", "matrix":
		return func(s string) string { return markdown(entities(s)) }
	}
	return nil
}

var entityReplacer = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;")

func entities(s string) string { return entityReplacer.Replace(s) }

// markdownReplacer puts a backslash before every character Markdown gives a meaning.
var markdownReplacer = strings.NewReplacer(
	`\`, `\\`, "*", `\*`, "_", `\_`, "~", `\~`, "`", "\\`", "|", `\|`, "[", `\[`, "]", `\]`, "(", `\(`, ")", `\)`, "#", `\#`)

func markdown(s string) string { return markdownReplacer.Replace(s) }

// noMentions breaks every @ with a zero-width space, so @channel, @here, @everyone and @user are text.
func noMentions(s string) string { return strings.ReplaceAll(s, "@", "@\u200b") }
