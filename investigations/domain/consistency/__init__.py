"""Self-consistency (method 2): do three answers to the same question state the same facts?

The generator is asked the same stored question several times at a temperature above zero.
Where it found a figure in the context it repeats it; where it guessed, the samples drift apart:
the article's "5 Jahre" / "alle zwei Jahre" / "je nach Behältergröße". This package reads the
factual values out of each sample (numbers with units, intervals, dates, references, codes,
names, evasions) and compares them; only where the values agree, or there are none, is a judge
model asked whether the samples contradict each other in content (``prompt``).

Comparison rule, per dimension (what a value measures: "time", "money:EUR", "date", ...):

* Values are equal when their normalised amounts agree within a relative 1e-9 ("24 Monate" ==
  "alle zwei Jahre" == "zweijährlich": all 730 days, a month being 365/12 days so that twelve
  months make a year exactly). A range ("3–5 Jahre", "zwischen 3 und 5 Jahren") equals any value
  inside it and any overlapping range: the sample that says "4 Jahre" is more specific, not
  contradicting; the judge still reads the content. Amount-less values (references, codes)
  compare by their key ("§ 4a", "DIN 4102").
* A dimension conflicts when two samples that both have values in it share none: one sample
  naming an extra fact ({5 Jahre} vs {5 Jahre, 10 Jahre bei Gefahrgut}) is not a contradiction,
  two samples committing to different figures are.
* An evasion ("je nach Behältergröße", "it depends on …") conflicts with a figure when the
  evading sample gives no value in that dimension and at least half the samples do: then the
  figure is the answer's point and one run declined to commit to it, which is what guessing
  looks like. A sample that gives the figure *and* hedges ("5 Jahre, je nach Behälter auch
  länger") does not evade it; a figure only one sample in three mentions is an aside. The rule
  only covers measures (time, money, counts, …), not dates, references or codes.
* Names (people, companies, authorities) never conflict on their own: paraphrases name the
  same body differently, so differing names are listed (``unshared_names``) and the judge
  decides. Codes and references with numbers ("DIN 4102" vs "DIN 4108", "§ 4" vs "§ 5") do
  conflict. Bare numbers without a unit or noun ("Schritt 3") are shown but never compared:
  without a unit there is no telling what they count.

Extraction is regular expressions, not a parser: it aims at the figures answers about rules,
deadlines and fees contain, in German and English, and prefers missing a value (the judge
still reads the content) to inventing a conflict. Known limits, all shown to the team lead with
the samples rather than hidden: values are compared per dimension, not per subject, so "innere
Prüfung alle 5 Jahre" in one sample and "Festigkeitsprüfung alle 10 Jahre" in another conflict;
qualifiers ("mindestens", "ca.", "up to") are not read, so "ca. 4 Wochen" and "etwa einen Monat"
(28 vs 30.4 days) conflict; numeric US dates (03/01/2026) are not read.

Layout: ``values`` reads the values out of a sample (``extract_values``), with the units and
number words in ``vocabulary``; ``compare`` applies the rule above and decides the verdict;
``prompt`` holds the judge's wording and parses its reply. Callers import from those modules.
"""
