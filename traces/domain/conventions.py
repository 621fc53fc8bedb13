"""The attribute names Treue reads, in one place: OpenInference (Arize Phoenix's conventions),
the OpenTelemetry GenAI semantic conventions, and Treue's own `treue.*`."""

# Treue's own, documented in docs/api.md ("OpenTelemetry").
TREUE_USE_CASE = "treue.use_case"
TREUE_QUESTION = "treue.question"
# A JSON string holding OpenAI's `choices[i].logprobs` object: {"content": [{"token", "logprob",
# "bytes", "top_logprobs"}, ...]}. No convention has an attribute for log-probabilities.
TREUE_LOGPROBS = "treue.logprobs"
# Segments (issue 40): the RAG prompt's version, and metadata by key (`treue.metadata.kanal`).
TREUE_PROMPT_VERSION = "treue.prompt_version"
TREUE_METADATA = "treue.metadata."
# OpenInference's prompt template version.
OI_PROMPT_VERSION = "llm.prompt_template.version"
PROMPT_VERSIONS = (TREUE_PROMPT_VERSION, OI_PROMPT_VERSION)

# OpenInference
OI_SPAN_KIND = "openinference.span.kind"
OI_LLM = "LLM"
OI_RETRIEVER = "RETRIEVER"
OI_RERANKER = "RERANKER"
OI_CHAIN_KINDS = frozenset({"CHAIN", "AGENT"})
INPUT_VALUE = "input.value"
INPUT_MIME_TYPE = "input.mime_type"
OUTPUT_VALUE = "output.value"
OUTPUT_MIME_TYPE = "output.mime_type"
JSON_MIME = "application/json"
RETRIEVAL_DOCUMENTS = "retrieval.documents."
RERANKER_OUTPUT_DOCUMENTS = "reranker.output_documents."
DOCUMENT_CONTENT = "document.content"
DOCUMENT_ID = "document.id"
DOCUMENT_SCORE = "document.score"
DOCUMENT_METADATA = "document.metadata"
DOCUMENT_SOURCES = ("document.name", "document.url")
LLM_INPUT_MESSAGES = "llm.input_messages."
LLM_OUTPUT_MESSAGES = "llm.output_messages."
MESSAGE_ROLE = "message.role"
MESSAGE_CONTENT = "message.content"
MESSAGE_CONTENTS = "message.contents."
MESSAGE_CONTENT_TEXT = "message_content.text"
MODEL_NAMES = (
    "llm.model_name",
    "llm.response.model_name",
    "gen_ai.response.model",
    "gen_ai.request.model",
    "llm.request.model_name",
)
OI_TOKENS = {
    "prompt": "llm.token_count.prompt",
    "completion": "llm.token_count.completion",
    "total": "llm.token_count.total",
}

# GenAI semantic conventions
GENAI_OPERATION = "gen_ai.operation.name"
GENAI_LLM_OPERATIONS = frozenset({"chat", "text_completion", "generate_content"})
GENAI_RETRIEVAL_OPERATION = "retrieval"
GENAI_CHAIN_OPERATIONS = frozenset({"invoke_workflow", "invoke_agent"})
GENAI_RETRIEVAL_QUERY = "gen_ai.retrieval.query.text"
GENAI_RETRIEVAL_DOCUMENTS = "gen_ai.retrieval.documents"
GENAI_INPUT_MESSAGES = "gen_ai.input.messages"
GENAI_OUTPUT_MESSAGES = "gen_ai.output.messages"
GENAI_SYSTEM_INSTRUCTIONS = "gen_ai.system_instructions"
GENAI_TOKENS = {
    "prompt": "gen_ai.usage.input_tokens",
    "completion": "gen_ai.usage.output_tokens",
}

RESOURCE_SERVICE_NAME = "service.name"

# What producers write instead of hidden content (OPENINFERENCE_HIDE_*).
REDACTED = "__REDACTED__"

# A span carrying one of these (as a name or a prefix) belongs to a RAG pipeline; any other
# span (an HTTP server span, a database call) is kept only as a skeleton.
RELEVANT_NAMES = frozenset({OI_SPAN_KIND, GENAI_OPERATION})
RELEVANT_PREFIXES = ("gen_ai.", "llm.", "retrieval.", "reranker.", "treue.")
# What a skeleton keeps: the question and the answer of a pipeline whose root span is not
# itself instrumented as a chain.
SKELETON_ATTRIBUTES = frozenset({INPUT_VALUE, INPUT_MIME_TYPE, OUTPUT_VALUE, OUTPUT_MIME_TYPE})
