package serve

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
)

// sampling are the request fields that tune the sampling chain and the
// length, shared by chat and text completions. Pointers tell "absent" from
// zero; absent fields take the server's defaults (its flags).
type sampling struct {
	Model               string          `json:"model"`
	Temperature         *float64        `json:"temperature"`
	TopP                *float64        `json:"top_p"`
	TopK                *int            `json:"top_k"`
	MinP                *float64        `json:"min_p"`
	RepeatPenalty       *float64        `json:"repeat_penalty"`
	PresencePenalty     *float64        `json:"presence_penalty"`
	FrequencyPenalty    *float64        `json:"frequency_penalty"`
	Seed                *int64          `json:"seed"`
	IgnoreEOS           *bool           `json:"ignore_eos"` // llama-server's extension
	MaxTokens           *int            `json:"max_tokens"`
	MaxCompletionTokens *int            `json:"max_completion_tokens"`
	Stop                json.RawMessage `json:"stop"`
	N                   *int            `json:"n"`
	Stream              bool            `json:"stream"`
	StreamOptions       *streamOptions  `json:"stream_options"`
	Logprobs            json.RawMessage `json:"logprobs"`
	ResponseFormat      *responseFormat `json:"response_format"`
	Grammar             string          `json:"grammar"` // llama-server's: a GBNF grammar (constrain.go)
}

type streamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

// chatRequest is POST /v1/chat/completions' body.
type chatRequest struct {
	sampling
	Messages json.RawMessage `json:"messages"`
	// TopLogprobs is how many alternatives each token's logprobs list
	// (with "logprobs": true).
	TopLogprobs *int            `json:"top_logprobs"`
	Tools       json.RawMessage `json:"tools"`
	ToolChoice  json.RawMessage `json:"tool_choice"`
	// ParallelToolCalls false makes a forced tool call (tool_choice
	// "required") a single call.
	ParallelToolCalls *bool `json:"parallel_tool_calls"`
	// ChatTemplateKwargs are extra template variables (vLLM's and
	// llama-server's extension); enable_thinking is the one read.
	ChatTemplateKwargs struct {
		EnableThinking *bool `json:"enable_thinking"`
	} `json:"chat_template_kwargs"`
	// ParseSpecial lets special-token text in the messages (<|im_end|>, …)
	// be control tokens; absent, the server's default (Options.ParseSpecial),
	// normally off: only the chat template's markup is special.
	ParseSpecial *bool `json:"parse_special"`
}

// completionRequest is POST /v1/completions' body.
type completionRequest struct {
	sampling
	Prompt json.RawMessage `json:"prompt"`
}

// usage counts tokens: the whole prompt (cached_tokens of it reused from the
// kept session, not prefilled again) and every generated token.
type usage struct {
	PromptTokens        int `json:"prompt_tokens"`
	CompletionTokens    int `json:"completion_tokens"`
	TotalTokens         int `json:"total_tokens"`
	PromptTokensDetails struct {
		CachedTokens int `json:"cached_tokens"`
	} `json:"prompt_tokens_details"`
}

type toolCall struct {
	Index    *int   `json:"index,omitempty"` // in stream deltas only
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

// message is an assistant message or a stream delta.
type message struct {
	Role             string     `json:"role,omitempty"`
	Content          *string    `json:"content"`
	ReasoningContent string     `json:"reasoning_content,omitempty"`
	ToolCalls        []toolCall `json:"tool_calls,omitempty"`
}

type chatChoice struct {
	Index        int           `json:"index"`
	Message      *message      `json:"message,omitempty"`
	Delta        *message      `json:"delta,omitempty"`
	Logprobs     *chatLogprobs `json:"logprobs"`
	FinishReason *string       `json:"finish_reason"`
}

type chatResponse struct {
	ID                string       `json:"id"`
	Object            string       `json:"object"`
	Created           int64        `json:"created"`
	Model             string       `json:"model"`
	SystemFingerprint string       `json:"system_fingerprint"`
	Choices           []chatChoice `json:"choices"`
	Usage             *usage       `json:"usage"`
}

type textChoice struct {
	Index        int           `json:"index"`
	Text         string        `json:"text"`
	Logprobs     *textLogprobs `json:"logprobs"`
	FinishReason *string       `json:"finish_reason"`
}

type textResponse struct {
	ID                string       `json:"id"`
	Object            string       `json:"object"`
	Created           int64        `json:"created"`
	Model             string       `json:"model"`
	SystemFingerprint string       `json:"system_fingerprint"`
	Choices           []textChoice `json:"choices"`
	Usage             *usage       `json:"usage"`
}

// apiError is OpenAI's error object, with the HTTP status it goes out with.
type apiError struct {
	Status  int     `json:"-"`
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    *string `json:"code"`
}

func (e *apiError) Error() string { return e.Message }

func strp(s string) *string { return &s }

func badRequest(param, code, format string, args ...any) *apiError {
	e := &apiError{Status: http.StatusBadRequest, Type: "invalid_request_error", Message: fmt.Sprintf(format, args...)}
	if param != "" {
		e.Param = strp(param)
	}
	if code != "" {
		e.Code = strp(code)
	}
	return e
}

func writeError(w http.ResponseWriter, e *apiError) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(e.Status)
	json.NewEncoder(w).Encode(map[string]*apiError{"error": e})
}

// decodeBody reads a JSON request body into v; errors name the field and
// the type expected.
func decodeBody(r *http.Request, v any) *apiError {
	d := json.NewDecoder(r.Body)
	err := d.Decode(v)
	if err == nil && d.More() {
		err = errors.New("trailing data after the JSON object")
	}
	if err == nil {
		return nil
	}
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	var big *http.MaxBytesError
	switch {
	case errors.As(err, &big):
		return &apiError{Status: http.StatusRequestEntityTooLarge, Type: "invalid_request_error",
			Message: fmt.Sprintf("the request body is larger than the server's limit of %d bytes (--max-body)", big.Limit)}
	case errors.As(err, &typ):
		field := strings.TrimPrefix(typ.Field, "sampling.") // the embedded struct's name is not the API's
		if field == "" {
			return badRequest("", "", "the request body must be a JSON object, got a JSON %s", typ.Value)
		}
		return badRequest(field, "invalid_type", "field %q: expected %s, got a JSON %s", field, jsonKind(typ.Type.String()), typ.Value)
	case errors.As(err, &syn):
		return badRequest("", "invalid_json", "the request body is not valid JSON: %v (at byte %d)", syn, syn.Offset)
	}
	return badRequest("", "invalid_json", "the request body is not valid JSON: %v", err)
}

// jsonKind names a Go type as the JSON it decodes from.
func jsonKind(t string) string {
	t = strings.TrimPrefix(t, "*")
	switch {
	case t == "string":
		return "a string"
	case t == "bool":
		return "a boolean"
	case strings.HasPrefix(t, "int"):
		return "an integer"
	case strings.HasPrefix(t, "float"):
		return "a number"
	case strings.HasPrefix(t, "[]"):
		return "an array"
	}
	return "an object"
}

// stopStrings reads "stop": absent, null, a string or an array of strings.
func stopStrings(raw json.RawMessage) ([]string, *apiError) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var one string
	if json.Unmarshal(raw, &one) == nil {
		if one == "" {
			return nil, nil
		}
		return []string{one}, nil
	}
	var many []string
	if err := json.Unmarshal(raw, &many); err != nil {
		return nil, badRequest("stop", "invalid_type", "field \"stop\": expected a string or an array of strings")
	}
	var out []string
	for _, s := range many {
		if s != "" {
			out = append(out, s)
		}
	}
	if len(out) > 4 {
		return nil, badRequest("stop", "invalid_value", "field \"stop\": at most 4 stop strings, got %d", len(out))
	}
	return out, nil
}
