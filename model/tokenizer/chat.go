package tokenizer

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
)

// The Qwen3 chat template, rendered by code. A GGUF's tokenizer.chat_template is Jinja
// from the file's author, and executing it is a risk (docs/reliability.md S6), so it is
// never executed: RenderQwen3Chat writes out what Qwen3's template (in tokenizer_config.json)
// produces, branch for branch, and KnownQwen3Template tells whether a file's template is
// that one.

// qwen3TemplateSHA256 is the SHA-256 of the chat_template string of Qwen3's
// tokenizer_config.json (testdata/tokenizer_config.json).
const qwen3TemplateSHA256 = "87a2728cb8dc9fe424d624542f6060ec05a1d285ebbec578bb078900e33396b5"

// KnownQwen3Template reports whether tmpl is exactly the template RenderQwen3Chat implements.
func KnownQwen3Template(tmpl string) bool {
	sum := sha256.Sum256([]byte(tmpl))
	return hex.EncodeToString(sum[:]) == qwen3TemplateSHA256
}

// Message is one turn of a conversation.
type Message struct {
	Role    string // "system", "user", "assistant" or "tool"
	Content string
	// ReasoningContent is an assistant turn's thinking. When nil, the template takes it from
	// a "<think>...</think>" block at the start of Content.
	ReasoningContent *string
	ToolCalls        []ToolCall // calls an assistant turn made
}

// ToolCall is a function call made by the assistant.
type ToolCall struct {
	Name      string
	Arguments string // JSON text, written as is
}

// ChatOptions are the template's switches.
type ChatOptions struct {
	AddGenerationPrompt bool // end with "<|im_start|>assistant\n" for the model to continue
	// DisableThinking is the template's enable_thinking=false: the generation prompt gets
	// an empty think block, so the model answers without thinking.
	DisableThinking bool
	// Tools are the function definitions offered to the model, each as JSON text (for
	// example {"type": "function", "function": {...}}). They go into the system turn
	// formatted as the template's tojson filter formats them (see PythonJSON).
	Tools []string
}

// RenderQwen3Chat renders msgs as Qwen3's chat template does. Encode the result with
// special-token parsing on.
func RenderQwen3Chat(msgs []Message, opt ChatOptions) (string, error) {
	if len(msgs) == 0 {
		return "", fmt.Errorf("tokenizer: chat: no messages")
	}
	for i, m := range msgs {
		switch m.Role {
		case "system", "user", "assistant", "tool":
		default:
			return "", fmt.Errorf("tokenizer: chat: message %d has role %q; use system, user, assistant or tool", i, clip(m.Role))
		}
		if len(m.ToolCalls) > 0 && m.Role != "assistant" {
			return "", fmt.Errorf("tokenizer: chat: message %d (%s) has tool calls; only assistant turns may", i, m.Role)
		}
	}
	var b strings.Builder
	switch {
	case len(opt.Tools) > 0:
		b.WriteString("<|im_start|>system\n")
		if msgs[0].Role == "system" {
			b.WriteString(msgs[0].Content + "\n\n")
		}
		b.WriteString("# Tools\n\nYou may call one or more functions to assist with the user query.\n\n" +
			"You are provided with function signatures within <tools></tools> XML tags:\n<tools>")
		for i, tool := range opt.Tools {
			j, err := PythonJSON(tool)
			if err != nil {
				return "", fmt.Errorf("tokenizer: chat: tool %d: %w", i, err)
			}
			b.WriteString("\n" + j)
		}
		b.WriteString("\n</tools>\n\nFor each function call, return a json object with function name and arguments " +
			"within <tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, " +
			"\"arguments\": <args-json-object>}\n</tool_call><|im_end|>\n")
	case msgs[0].Role == "system":
		b.WriteString("<|im_start|>system\n" + msgs[0].Content + "<|im_end|>\n")
	}
	// The last real user query: the latest user turn that is not a wrapped tool response.
	lastQuery := len(msgs) - 1
	for i := len(msgs) - 1; i >= 0; i-- {
		c := msgs[i].Content
		if msgs[i].Role == "user" && !(strings.HasPrefix(c, "<tool_response>") && strings.HasSuffix(c, "</tool_response>")) {
			lastQuery = i
			break
		}
	}
	last := len(msgs) - 1
	for i, m := range msgs {
		switch {
		case m.Role == "user" || (m.Role == "system" && i > 0):
			b.WriteString("<|im_start|>" + m.Role + "\n" + m.Content + "<|im_end|>\n")
		case m.Role == "assistant":
			content, reasoning := m.Content, ""
			if m.ReasoningContent != nil {
				reasoning = *m.ReasoningContent
			} else if strings.Contains(m.Content, "</think>") {
				parts := strings.Split(m.Content, "</think>")
				content = strings.TrimLeft(parts[len(parts)-1], "\n")
				before := strings.Split(strings.TrimRight(parts[0], "\n"), "<think>")
				reasoning = strings.TrimLeft(before[len(before)-1], "\n")
			}
			if i > lastQuery && (i == last || reasoning != "") {
				// Turns after the last query keep their thinking; earlier ones drop it.
				b.WriteString("<|im_start|>assistant\n<think>\n" + strings.Trim(reasoning, "\n") + "\n</think>\n\n" + strings.TrimLeft(content, "\n"))
			} else {
				b.WriteString("<|im_start|>assistant\n" + content)
			}
			for j, tc := range m.ToolCalls {
				if j > 0 || content != "" {
					b.WriteString("\n")
				}
				b.WriteString("<tool_call>\n{\"name\": \"" + tc.Name + "\", \"arguments\": " + tc.Arguments + "}\n</tool_call>")
			}
			b.WriteString("<|im_end|>\n")
		case m.Role == "tool":
			if i == 0 || msgs[i-1].Role != "tool" {
				b.WriteString("<|im_start|>user")
			}
			b.WriteString("\n<tool_response>\n" + m.Content + "\n</tool_response>")
			if i == last || msgs[i+1].Role != "tool" {
				b.WriteString("<|im_end|>\n")
			}
		}
	}
	if opt.AddGenerationPrompt {
		b.WriteString("<|im_start|>assistant\n")
		if opt.DisableThinking {
			b.WriteString("<think>\n\n</think>\n\n")
		}
	}
	return b.String(), nil
}
