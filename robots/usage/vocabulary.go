package usage

import "strings"

// Term is one row of the vocabulary: a label of one form and a purpose it
// speaks for.
//
// Depth places the label in the aipref category hierarchy as seen from
// the purpose: 0, the label names the purpose itself; 1 or 2, a broader
// category (a parent, a grandparent) whose value the purpose inherits when
// no narrower label for it is stated in the same expression (one robots.txt
// line, one header). Within one expression the narrowest stated depth
// decides, and at equal depth a refusal wins; across expressions any
// refusal wins. A label of several purposes has one row per purpose.
type Term struct {
	Form    Form
	Label   string
	Purpose string
	Depth   int
	// Spec names the text and revision the row follows; URL is where it is.
	Spec, URL string
	// Note says what the label means there, briefly.
	Note string
}

const (
	vocab08URL = "https://www.ietf.org/archive/id/draft-ietf-aipref-vocab-08.txt"
	vocab04URL = "https://www.ietf.org/archive/id/draft-ietf-aipref-vocab-04.txt"
	vocab03URL = "https://www.ietf.org/archive/id/draft-ietf-aipref-vocab-03.txt"
	vocab02URL = "https://www.ietf.org/archive/id/draft-ietf-aipref-vocab-02.txt"
	vocab01URL = "https://www.ietf.org/archive/id/draft-ietf-aipref-vocab-01.txt"
	signalsURL = "https://blog.cloudflare.com/content-signals-policy/"
	tdmrepURL  = "https://www.w3.org/community/reports/tdmrep/CG-FINAL-tdmrep-20240510/"
	noaiURL    = "https://www.deviantart.com/team/journal/UPDATE-All-Deviations-Are-Opted-Out-of-AI-Datasets-934500371"
)

// vocabulary is the one table mapping every form's labels onto purposes.
// Content-Usage follows draft-ietf-aipref-vocab-08 (train-ai, ai-use,
// search; no hierarchy); the labels of earlier revisions (-01 to -04) are
// mapped too, with their hierarchy, because sites still write them: -08
// would ignore them as unknown, so reading them is robotsgate's policy,
// and it only ever adds refusals a site wrote. A label no row names is
// ignored. An array, not a slice, so that nothing can change it.
var vocabulary = [...]Term{
	// draft-ietf-aipref-vocab-08 (the labels also of -02 to -07).
	{FormContentUsage, "train-ai", PurposeAITrain, 0, "draft-ietf-aipref-vocab-08 (also -02 to -07)", vocab08URL,
		"AI training: modifying a model's parameters (-08: generative models; -03: any machine learning)"},
	{FormContentUsage, "ai-use", PurposeAIInput, 0, "draft-ietf-aipref-vocab-08 (also -02)", vocab08URL,
		"AI use: input to a generative model the user did not provide directly"},
	{FormContentUsage, "search", PurposeSearch, 0, "draft-ietf-aipref-vocab-08 (also -01 to -07)", vocab08URL,
		"search: select assets and direct users to them (links, short excerpts)"},
	// Earlier revisions.
	{FormContentUsage, "train-genai", PurposeAITrain, 0, "draft-ietf-aipref-vocab-03 (also -02)", vocab03URL,
		"generative AI training, a child of train-ai"},
	{FormContentUsage, "ai-output", PurposeAIInput, 0, "draft-ietf-aipref-vocab-04", vocab04URL,
		"AI output: used by an AI system to generate outputs"},
	{FormContentUsage, "ai-output", PurposeSearch, 1, "draft-ietf-aipref-vocab-04", vocab04URL,
		"parent of search (AI output included search results)"},
	{FormContentUsage, "bots", PurposeSearch, 2, "draft-ietf-aipref-vocab-04 (also -03)", vocab04URL,
		"automated processing: parent of every category"},
	{FormContentUsage, "bots", PurposeAITrain, 1, "draft-ietf-aipref-vocab-04 (also -03)", vocab04URL,
		"automated processing: parent of every category"},
	{FormContentUsage, "bots", PurposeAIInput, 1, "draft-ietf-aipref-vocab-04 (also -03)", vocab04URL,
		"automated processing: parent of every category"},
	{FormContentUsage, "all", PurposeSearch, 2, "draft-ietf-aipref-vocab-02", vocab02URL,
		"all automated processing: parent of every category"},
	{FormContentUsage, "all", PurposeAITrain, 1, "draft-ietf-aipref-vocab-02", vocab02URL,
		"all automated processing: parent of every category"},
	{FormContentUsage, "all", PurposeAIInput, 1, "draft-ietf-aipref-vocab-02", vocab02URL,
		"all automated processing: parent of every category"},
	{FormContentUsage, "tdm", PurposeSearch, 2, "draft-ietf-aipref-vocab-01", vocab01URL,
		"text and data mining: parent of every category"},
	{FormContentUsage, "tdm", PurposeAITrain, 1, "draft-ietf-aipref-vocab-01", vocab01URL,
		"text and data mining: parent of every category"},
	{FormContentUsage, "tdm", PurposeAIInput, 1, "draft-ietf-aipref-vocab-01", vocab01URL,
		"text and data mining: parent of every category"},
	{FormContentUsage, "ai", PurposeAITrain, 0, "draft-ietf-aipref-vocab-01", vocab01URL,
		"AI training"},
	{FormContentUsage, "genai", PurposeAITrain, 0, "draft-ietf-aipref-vocab-01", vocab01URL,
		"generative AI training, a child of ai"},
	{FormContentUsage, "inference", PurposeAIInput, 0, "draft-ietf-aipref-vocab-01", vocab01URL,
		"AI inference: input to a trained model"},

	// Cloudflare's Content Signals Policy (24 Sep 2025), also
	// draft-romm-aipref-contentsignals-00: one label per purpose.
	{FormContentSignal, "search", PurposeSearch, 0, "Content Signals Policy 2025-09-24 (draft-romm-aipref-contentsignals-00)", signalsURL,
		"building a search index and giving results (links, short excerpts); not AI summaries"},
	{FormContentSignal, "ai-input", PurposeAIInput, 0, "Content Signals Policy 2025-09-24 (draft-romm-aipref-contentsignals-00)", signalsURL,
		"input to AI models: retrieval-augmented generation, grounding, generative answers"},
	{FormContentSignal, "ai-train", PurposeAITrain, 0, "Content Signals Policy 2025-09-24 (draft-romm-aipref-contentsignals-00)", signalsURL,
		"training or fine-tuning AI models (any model)"},

	// TDMRep: a reservation of text and data mining rights (EU DSM
	// directive, article 4) refuses the AI purposes. Not search: the EU
	// GPAI code of practice asks that honouring a TDM opt-out not degrade
	// search indexing, and a search crawler must not be blocked by a
	// training opt-out.
	{FormTDMRep, "tdm-reservation", PurposeAITrain, 0, "W3C TDMRep, Final CG Report 2024-05-10", tdmrepURL,
		"1: text and data mining rights reserved; 0: not reserved"},
	{FormTDMRep, "tdm-reservation", PurposeAIInput, 0, "W3C TDMRep, Final CG Report 2024-05-10", tdmrepURL,
		"1: text and data mining rights reserved; 0: not reserved"},

	// X-Robots-Tag noai/noimageai (DeviantArt, Nov 2022; no standard):
	// content "may not be used as input to AI models", training included.
	{FormNoAI, "noai", PurposeAITrain, 0, "X-Robots-Tag convention, DeviantArt 2022-11", noaiURL,
		"not for AI datasets or input to AI models"},
	{FormNoAI, "noai", PurposeAIInput, 0, "X-Robots-Tag convention, DeviantArt 2022-11", noaiURL,
		"not for AI datasets or input to AI models"},
	{FormNoAI, "noimageai", PurposeAITrain, 0, "X-Robots-Tag convention, DeviantArt 2022-11", noaiURL,
		"as noai, for images: read only on an image/* response"},
	{FormNoAI, "noimageai", PurposeAIInput, 0, "X-Robots-Tag convention, DeviantArt 2022-11", noaiURL,
		"as noai, for images: read only on an image/* response"},
}

// Vocabulary returns the table mapping each form's labels onto purposes,
// in a fresh slice; a test holds the manual's table to it.
func Vocabulary() []Term {
	return append([]Term(nil), vocabulary[:]...)
}

// known reports whether the vocabulary names label for form.
func known(form Form, label string) bool {
	for i := range vocabulary {
		if vocabulary[i].Form == form && sameLabel(form, vocabulary[i].Label, label) {
			return true
		}
	}
	return false
}

// depth is the row's depth for a statement's label and a purpose; ok is
// false when the label does not speak for the purpose.
func depth(form Form, label, purpose string) (d int, ok bool) {
	for i := range vocabulary {
		t := &vocabulary[i]
		if t.Form == form && t.Purpose == purpose && sameLabel(form, t.Label, label) {
			return t.Depth, true
		}
	}
	return 0, false
}

// sameLabel compares labels as each form does: aipref labels are
// case-sensitive (an sf-key is lower-case by grammar); the robots.txt and
// header conventions are not.
func sameLabel(form Form, table, label string) bool {
	if form == FormContentUsage {
		return table == label
	}
	return strings.EqualFold(table, label)
}

// knownPurpose reports whether some row speaks for purpose p.
func knownPurpose(p string) bool {
	for i := range vocabulary {
		if vocabulary[i].Purpose == p {
			return true
		}
	}
	return false
}
