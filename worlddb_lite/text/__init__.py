"""Text without a store: words, name forms, dates and times, phonetic keys, stopwords, conversation windows."""
